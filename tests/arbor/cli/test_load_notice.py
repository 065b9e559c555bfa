"""A campaign that starts on a busy machine says so, with the load and what to do."""

from arbor.cli.load_notice import load_notice


def test_busy_machine_gets_a_notice_with_load_and_advice():
    text = load_notice(None, load=2.9, cores=2)
    assert "load average 2.9 on 2 core(s)" in text and "num_threads" in text and "stop other work" in text
    assert "set target.num_threads: 1" in load_notice(2, load=1.2, cores=2)


def test_quiet_machine_gets_none():
    assert load_notice(1, load=0.3, cores=2) is None
    assert load_notice(1, load=3.0, cores=16) is None


def test_no_advice_to_set_what_is_already_set():
    text = load_notice(1, load=3.4, cores=2)
    assert "set target.num_threads" not in text and "CPU time" in text and "takes longer" in text
