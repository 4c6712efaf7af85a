"""The proxy's options: the lease follows the side query's timeout; bad values are refused
with the flag named."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autocompact.errors import ConfigError
from autocompact.serve import ServeConfig
from autocompact.serve.app import LEASE_MARGIN

UPSTREAMS = {"openai": "http://127.0.0.1:9/v1"}


def _config(**options: object) -> ServeConfig:
    return ServeConfig(upstreams=UPSTREAMS, store="sqlite:///x.db", **options)  # type: ignore[arg-type]


def test_lease_follows_the_side_query_timeout() -> None:
    """Without --lease-seconds a lease lasts one side query's timeout plus the margin."""
    assert _config().lease_length == 300.0 + LEASE_MARGIN
    assert _config(side_query_timeout=60.0).lease_length == 60.0 + LEASE_MARGIN
    assert _config(side_query_timeout=60.0, lease_seconds=5.0).lease_length == 5.0


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        ({"lease_seconds": 0.0}, "--lease-seconds"),
        ({"lease_seconds": math.inf}, "--lease-seconds"),  # a killed worker's lease never ends
        ({"timeout": math.inf}, "--timeout"),
        ({"side_query_timeout": math.inf}, "--side-query-timeout"),
        ({"timeout": math.nan}, "--timeout"),
        ({"side_query_timeout": -1.0}, "--side-query-timeout"),
        ({"keep_share": 1.0}, "--keep-share"),
        ({"summary_target_tokens": 0}, "--summary-target-tokens"),
    ],
)
def test_bad_values_name_the_flag(options: dict[str, object], flag: str) -> None:
    """An out-of-range option is a ConfigError naming its flag and the value."""
    with pytest.raises(ConfigError, match=flag):
        _config(**options)


def test_the_planner_gets_the_compaction_settings(tmp_path: Path) -> None:
    """--summary-target-tokens, --keep-share and the lease length reach the planner."""
    from autocompact.serve import ServeApp

    config = ServeConfig(
        upstreams=UPSTREAMS,
        store=f"sqlite:///{tmp_path / 's.db'}",
        summary_target_tokens=48,
        keep_share=0.7,
        side_query_timeout=10.0,
    )
    app = ServeApp(config)
    try:
        assert app.planner.summary_target_tokens == 48
        assert app.planner.keep_share == 0.7
        assert app.planner.lease_seconds == 10.0 + LEASE_MARGIN
    finally:
        app.store.close()
