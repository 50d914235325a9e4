"""`ReviewSilence`: which pods count as created without the API server calling the webhook."""

from __future__ import annotations

import pytest

from vpa.components.webhook.silence import ReviewSilence
from vpa.model.pod import PodView

WITH_VPAS = {"team-a", "team-b"}


@pytest.mark.parametrize(
    ("added", "reset_after", "pods", "example", "where"),
    [
        pytest.param([], None, 0, "", [], id="nothing created"),
        pytest.param([("kube-system", "dns")], None, 0, "", [], id="namespace without a VPA is not ours"),
        pytest.param([("team-a", "web-1"), ("team-b", "db-0"), ("other", "x")], None, 2, "team-a/web-1",
                     ["team-a", "team-b"], id="only namespaces with VPAs count; first pod is the example"),
        pytest.param([("team-a", "web-1"), ("team-a", "web-2")], 2, 0, "", [],
                     id="a review clears the count"),
        pytest.param([("team-a", "web-1"), ("team-b", "db-0")], 1, 1, "team-b/db-0", ["team-b"],
                     id="counting starts again after a review"),
    ],
)
def test_pods_since_the_last_review(
    added: list[tuple[str, str]], reset_after: int | None, pods: int, example: str, where: list[str]
) -> None:
    silence = ReviewSilence(WITH_VPAS)
    for index, (namespace, name) in enumerate(added, start=1):
        silence.pod_added(PodView(namespace=namespace, name=name))
        if index == reset_after:
            silence.reset()
    assert (silence.pods, silence.example, sorted(silence.where)) == (pods, example, where)
    if pods:
        fields = silence.warning("kube-system/vpa-webhook", 61.4)
        assert fields["pods_created"] == pods
        assert fields["silent_for_s"] == 61
        assert "kube-system/vpa-webhook" in str(fields["check"])
