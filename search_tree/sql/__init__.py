"""The SQLAlchemy backend of the store: SQLite (WAL) by default, any SQLAlchemy URL works.

``store.SqlStore`` implements ``arbor.search_tree.store.Store``; ``engine`` builds writer and
read-only engines, ``models`` is the schema, ``migrate`` brings a database to the alembic head
on open (``migrations/``). Nothing outside this package imports it except ``open_store``.
"""
