"""The benchmark report states its targets as met or not from the figures, never by hand."""

from __future__ import annotations

from bench.run import target_status


def result(wall_s: float, peak_rss_mb: int = 1000, out_after: int = 0, infeasible: int = 0,
           moved_over_lb: float = 1.0, claim_disagreements: int = 0) -> dict:
    return {"wall_s": wall_s, "peak_rss_mb": peak_rss_mb, "out_of_band_after": out_after, "infeasible": infeasible,
            "moved_over_lb": moved_over_lb, "claim_disagreements": claim_disagreements}


def test_every_target_of_the_scales_measured_is_judged() -> None:
    status = dict(target_status({"small": result(5, moved_over_lb=1.2), "medium": result(19.9),
                                 "large": result(61, peak_rss_mb=9000, out_after=2, infeasible=1,
                                                 claim_disagreements=3)}))
    assert status == {
        "small out of band after == infeasible (0 == 0)": True,
        "small planner's claim == re-check (0 disagreements)": True,
        "small moved/LB 1.2 <= 1.10": False,
        "medium wall 19.9 s <= 20 s": True,
        "medium out of band after == infeasible (0 == 0)": True,
        "medium planner's claim == re-check (0 disagreements)": True,
        "medium moved/LB 1.0 <= 1.10": True,
        "large wall 61.0 s <= 60 s": False,
        "large peak 9000 MB <= 8192 MB": False,
        "large out of band after == infeasible (2 == 1)": False,
        "large planner's claim == re-check (3 disagreements)": False,
    }


def test_validation_and_unexplained_brokers_are_targets_where_measured() -> None:
    failed = {**result(10), "validation": "failed: every replica on a broker of the topic's pool",
              "left_outside_unexplained": 2}
    status = dict(target_status({"single-200": failed, "single-1000": {**result(50), "validation": "passed",
                                                                        "left_outside_unexplained": 0}}))
    assert status["single-200 plan passes validation (failed: every replica on a broker of the topic's pool)"] is False
    assert status["single-200 every broker left outside its band or target band is listed with the reason "
                  "(2 not)"] is False
    assert status["single-1000 plan passes validation (passed)"] is True
    assert status["single-1000 every broker left outside its band or target band is listed with the reason "
                  "(0 not)"] is True


def test_the_side_by_side_targets_are_judged_per_scale() -> None:
    from bench.side_by_side import ratio_targets

    def compared(median: float, peak: int, new_out: int, old_out: int) -> dict:
        return {"ratio_new_over_baseline": {"median": median}, "new_peak_rss_mb": peak,
                "plans": {"new": {"out_of_band_after": new_out}, "baseline": {"out_of_band_after": old_out}}}

    status = dict(ratio_targets({"single-1000": compared(0.36, 5000, 0, 74), "large": compared(0.64, 7000, 3, 2)}))
    assert status == {"single-1000 ratio 0.36 <= 0.35": False, "single-1000 peak 5000 MB <= 6144 MB": True,
                      "single-1000 out of band after 0 <= the baseline's 74": True,
                      "large ratio 0.64 <= 0.7": True, "large peak 7000 MB <= 6144 MB": False,
                      "large out of band after 3 <= the baseline's 2": False}


def test_the_plans_bands_against_the_rechecks_are_a_target_where_measured() -> None:
    status = dict(target_status({"small": {**result(5), "band_disagreements": 0},
                                 "medium": {**result(15), "band_disagreements": 2}, "large": result(50)}))
    assert status["small plan's bands == re-check's (0 disagreements)"] is True
    assert status["medium plan's bands == re-check's (2 disagreements)"] is False
    # A row measured before the figure existed is not judged on it.
    assert not [name for name in status if name.startswith("large plan's bands")]
