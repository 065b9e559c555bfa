import math

import pytest

from arbor.search_tree.pareto import (Point, dominates, hypervolume, interpolated_throughput_at_slo, pareto_front,
                                      pareto_improvement_pct, reference_point, throughput_at_slo)


def test_front_keeps_only_non_dominated_points_in_latency_order():
    pts = [Point(10, 100, "a"), Point(8, 120, "dominated"), Point(20, 300, "b"), Point(15, 300, "dominated too"),
           Point(30, 900, "c"), Point(float("nan"), 50, "nan")]
    front = pareto_front(pts)
    assert [p.label for p in front] == ["a", "b", "c"]
    assert dominates(Point(10, 100), Point(8, 120)) and not dominates(Point(10, 100), Point(10, 100))


def test_hypervolume_of_known_staircases():
    ref = Point(0, 1000)
    assert hypervolume([Point(10, 200)], ref) == pytest.approx(10 * 800)
    # two steps: [200, 500) dominated up to 10, [500, 1000) up to 30
    assert hypervolume([Point(10, 200), Point(30, 500)], ref) == pytest.approx(10 * 300 + 30 * 500)
    # a dominated point adds nothing; a point beyond the reference latency adds nothing
    assert hypervolume([Point(10, 200), Point(5, 300), Point(99, 2000)], ref) == pytest.approx(8000)
    assert hypervolume([], ref) == 0.0


def test_reference_point_and_improvement_are_relative_to_the_baseline():
    base = [Point(10, 200), Point(12, 800)]
    ref = reference_point(base, margin=1.5)
    assert ref == Point(0.0, 1200.0, "reference")
    hb = hypervolume(base, ref)
    better = [Point(20, 150), Point(30, 400)]  # better everywhere
    hc = hypervolume(better, ref)
    assert hc > hb
    assert pareto_improvement_pct(hc, hb) == pytest.approx((hc / hb - 1) * 100)
    assert pareto_improvement_pct(hb, hb) == 0.0
    with pytest.raises(ValueError):
        reference_point([Point(1, math.inf)])


def test_throughput_at_slo_takes_the_best_level_that_meets_it():
    assert throughput_at_slo([(5, True), (9, True), (14, False)]) == 9
    assert throughput_at_slo([(5, False)]) == 0.0


def test_interpolated_objective_moves_smoothly_across_the_slo():
    slo = 500.0
    # levels meet, meet, miss: crossing between (10 req/s, 300 ms) and (20 req/s, 700 ms) at 500 ms
    curve = [(5.0, [(100.0, slo)]), (10.0, [(300.0, slo)]), (20.0, [(700.0, slo)])]
    assert interpolated_throughput_at_slo(curve) == pytest.approx(15.0)
    # every level meets: the best level
    assert interpolated_throughput_at_slo([(5.0, [(100.0, slo)]), (8.0, [(200.0, slo)])]) == 8.0
    # the first level already misses: interpolate from zero load (0 req/s, 0 ms)
    assert interpolated_throughput_at_slo([(10.0, [(1000.0, slo)])]) == pytest.approx(5.0)
    # several SLO metrics: the first one to cross decides
    two = [(10.0, [(100.0, 200.0), (100.0, 1000.0)]), (20.0, [(300.0, 200.0), (200.0, 1000.0)])]
    assert interpolated_throughput_at_slo(two) == pytest.approx(15.0)
    # a level with no latency (nothing completed) counts as a miss at zero throughput
    assert interpolated_throughput_at_slo([(4.0, [(100.0, slo)]), (0.0, [(None, slo)])]) == 4.0
    # continuity: a p99 wobbling just around the SLO barely moves the objective
    lo = interpolated_throughput_at_slo([(10.0, [(300.0, slo)]), (20.0, [(499.0, slo)])])
    hi = interpolated_throughput_at_slo([(10.0, [(300.0, slo)]), (20.0, [(501.0, slo)])])
    assert lo == 20.0 and hi == pytest.approx(19.95, abs=0.01)
