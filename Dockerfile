FROM python:3.11.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN useradd --create-home --uid 1000 app
WORKDIR /src
COPY pyproject.toml README.md ./
COPY worker_automation ./worker_automation
# Installed (not run from /src), then the source is left behind: every process runs the
# installed package. /data and /keys belong to the service's user, so a named volume mounted
# there starts writable by it.
RUN pip install --no-cache-dir . \
    && rm -rf /src \
    && mkdir -p /data /keys \
    && chown app:app /data /keys
USER app
# The working directory is where the default SQLite file and the embedded broker's files go.
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz').status == 200 else 1)"
CMD ["worker-automation", "serve", "--host", "0.0.0.0", "--port", "8000"]
