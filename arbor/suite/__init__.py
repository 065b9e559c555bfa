"""``arbor suite DIR``: one campaign per KernelBench-style problem file, measured side by side.

discover (which files) -> calibrate (size_scale per problem) -> campaign (the usual loop) ->
compare (eager, torch.compile default and Arbor's verified best, one harness job) -> table.
"""
