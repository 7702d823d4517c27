"""A tagged side-by-side comparison judges each scale against the --target it was measured with (issue 36: a speed
target at single-200, "no slower" at single-1000), and a baseline checkout may have its CLI as a package."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.side_by_side import main, ratio_targets


def compared(median: float, target: float | None = None) -> dict:
    return {"ratio_new_over_baseline": {"median": median}, "new_peak_rss_mb": 1000,
            "plans": {"new": {"out_of_band_after": 0}, "baseline": {"out_of_band_after": 0}},
            **({"target": target} if target is not None else {})}


def test_each_scale_keeps_the_target_it_was_measured_with() -> None:
    status = dict(ratio_targets({"single-200": compared(0.5, 0.8), "single-1000": compared(0.95, 1.0),
                                 "medium": compared(0.9)}, target_ratio=1.0))
    assert status["single-200 ratio 0.5 <= 0.8"] is True
    assert status["single-1000 ratio 0.95 <= 1.0"] is True
    assert status["medium ratio 0.9 <= 1.0"] is True  # measured before targets were kept: the run's


def test_a_checkout_whose_cli_is_a_package_is_a_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "src" / "kafka_rebalancer" / "cli").mkdir(parents=True)
    (tmp_path / "src" / "kafka_rebalancer" / "cli" / "__init__.py").write_text("")
    # Accepted as a checkout: the run stops at the next check (an unknown scale), not at the baseline's.
    assert main(["--baseline", str(tmp_path), "--scales", "no-such-scale"]) == 2
    assert "--scales: unknown no-such-scale" in capsys.readouterr().err
    assert main(["--baseline", str(tmp_path / "nothing"), "--scales", "single-200"]) == 2
    assert "not a kafka-rebalancer checkout" in capsys.readouterr().err
