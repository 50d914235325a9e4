# syntax=docker/dockerfile:1
# The vpa image: `vpa run` (and `vpa sim`, `vpa replay`) on a slim Python 3.11.
#
# Stage 1 builds wheels of vpa and every dependency; stage 2 installs from those wheels only (no index, no
# compiler, no cache) and runs as the non-root uid 65532 the chart expects. The root filesystem may be
# read-only: nothing is written outside /tmp (the chart mounts an emptyDir there).
#
#   docker build -t vpa:0.1.0 .
#   kind load docker-image vpa:0.1.0        # or push it to your registry
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS wheels
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY vpa ./vpa
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="vpa" \
      org.opencontainers.image.description="Vertical Pod Autoscaler in one asyncio process" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TZ=UTC
RUN --mount=type=bind,from=wheels,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels "vpa==${VERSION}"
USER 65532:65532
EXPOSE 8942 8000
ENTRYPOINT ["vpa"]
CMD ["run"]
