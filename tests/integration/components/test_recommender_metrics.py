"""The recommender's upstream quality and resources metrics after loops over a known usage profile."""

from __future__ import annotations

from tests.integration.components.recommender_helpers import VPAS, create, deployment, harness, vpa
from tests.integration.components.test_recommender import STEADY, STEP_S
from vpa.components.health import render_metrics


async def test_quality_metrics_follow_samples_and_recommendations() -> None:
    async with harness() as h:
        await create(h, "deployments.apps", deployment("web", STEADY))
        await create(h, VPAS, vpa("web"))  # updateMode Off: quality metrics still count (scaling mode Auto)
        reports = [await h.loop(), *await h.run_for(3600, STEP_S)]
        loops = len(reports)
        assert [r.samples for r in reports] == [2] * loops  # one CPU and one memory sample per loop

        # The first loop's samples came before any recommendation.
        for resource in ("cpu", "memory"):
            assert h.metric("vpa_quality_usage_sample_missing_recommendation_count", update_mode="Off",
                            resource=resource, is_oom="false") == 1
        assert h.metric("vpa_quality_cpu_recommendation_lower_equal_usage_diffs_cores_count",
                        update_mode="Off", recommendation_missing="true") == 1
        # Every later sample against the 587m / 250Mi recommendation: both above the 500m / 200Mi usage.
        assert h.metric("vpa_quality_cpu_recommendations_cores_count", update_mode="Off") == loops - 1
        cores = h.metric("vpa_quality_cpu_recommendations_cores_sum", update_mode="Off")
        assert abs(cores - (loops - 1) * 0.587) < 1e-9
        assert h.metric("vpa_quality_mem_recommendations_bytes_count", update_mode="Off",
                        is_oom="false") == loops - 1
        over = h.metric("vpa_quality_cpu_recommendation_over_usage_diffs_cores_sum", update_mode="Off",
                        recommendation_missing="false")
        assert abs(over - (loops - 1) * 0.087) < 1e-9
        assert h.metric("vpa_quality_mem_recommendation_over_usage_diffs_bytes_sum", update_mode="Off",
                        recommendation_missing="false", is_oom="false") == (loops - 1) * 50 * 2**20
        assert h.metric("vpa_quality_mem_recommendation_lower_equal_usage_diffs_bytes_count",
                        update_mode="Off", recommendation_missing="false", is_oom="false") == 0
        # (500m - 587m) / 587m = -0.148: in the (-0.25, -0.1] bucket, and summed as client_golang sums.
        for le, count in (("-0.25", 0), ("-0.1", loops - 1), ("+Inf", loops - 1)):
            assert h.metric("vpa_quality_usage_recommendation_relative_diffs_bucket", update_mode="Off",
                            resource="cpu", is_oom="false", le=le) == count
        relative = h.metric("vpa_quality_usage_recommendation_relative_diffs_sum", update_mode="Off",
                            resource="cpu", is_oom="false")
        assert abs(relative - (loops - 1) * (0.5 - 0.587) / 0.587) < 1e-9
        assert h.metric("vpa_quality_mem_recommendations_bytes_bucket", update_mode="Off", is_oom="false",
                        le="2.56e+08") == 0  # 250Mi (262 MB) is above 256 MB ...
        assert h.metric("vpa_quality_mem_recommendations_bytes_bucket", update_mode="Off", is_oom="false",
                        le="5.12e+08") == loops - 1  # ... and below 512 MB (Go's bucket labels)
        # Each loop's recommendation against the previous one: steady usage, no change.
        for resource in ("cpu", "memory"):
            assert h.metric("vpa_quality_relative_recommendation_changes_count", update_mode="Off",
                            resource=resource, vpa_size_log2="0") == loops - 1
            assert h.metric("vpa_quality_relative_recommendation_changes_bucket", update_mode="Off",
                            resource=resource, vpa_size_log2="0", le="0.0") == loops - 1
        # One container's requests read per loop.
        sources = ("Pod.Status.ContainerStatuses", "Pod.Spec.Containers")
        assert sum(h.metric("vpa_resources_get_resources_count", source=s) for s in sources) == loops

        text = render_metrics(h.registry).decode()
        assert "# TYPE vpa_recommender_metric_server_responses counter\n" in text
        assert (f'vpa_recommender_metric_server_responses{{client_name="default-metrics-client",'
                f'is_error="false"}} {float(loops)}\n') in text
        assert "# TYPE vpa_quality_usage_sample_missing_recommendation_count counter\n" in text
        assert "# TYPE vpa_resources_get_resources_count counter\n" in text
        # Upstream's counters keep their names without `_total`; only our own counters carry it.
        ours = ("vpa_recommender_skipped_inputs", "vpa_recommender_write_errors",
                "vpa_recommender_status_writes_skipped")
        assert "_total" not in "".join(
            line for line in text.splitlines() if line.startswith("vpa_") and not line.startswith(ours))
        assert "vpa_recommender_status_writes_skipped_total 0.0\n" in text
