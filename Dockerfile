# The in-cluster runner: the conformance suites, run by pytest with the gpuconf plugin against the
# cluster it runs in (manifests/runner/ gives it a ServiceAccount, a kubeconfig and a results
# volume). It needs no GPU: it only talks to the API server; the probe pods it launches hold the GPUs.
#
#   docker build -t REGISTRY/gpuconf-runner:0.1.0 . && docker push REGISTRY/gpuconf-runner:0.1.0
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# gpuconf runs from its checkout (probe sources and manifest templates are read from it), so the
# project is installed in place (editable) at /opt/gpuconf.
WORKDIR /opt/gpuconf
COPY pyproject.toml README.md conftest.py ./
COPY gpuconf/ gpuconf/
COPY suites/ suites/
COPY probes/ probes/
COPY manifests/ manifests/
RUN pip install -e . && python -c "import gpuconf.plugin.session, gpuconf.plugin.fixtures"

# An unprivileged user, numeric so runAsNonRoot can verify it (the manifests run it as 65532).
USER 65532:65532

# The pod's args are the suite's options (manifests/runner/job.yaml: --kubeconfig, --namespace,
# --report-dir); without any, the reports go to /results.
ENTRYPOINT ["python", "-m", "pytest", "suites/", "-p", "no:cacheprovider"]
CMD ["--report-dir", "/results"]
