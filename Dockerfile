# consolidator in a container: the daemon by default, any other command as arguments, e.g.
#   docker build -t consolidator .
#   docker run --rm consolidator status --db postgresql://consolidator@db:5432/consolidator
#
# The wheel is built in a throwaway stage, so the final image holds the installed package
# (with its prompts and migrations) and nothing of the source tree.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY consolidator ./consolidator
COPY migrations ./migrations
COPY prompts ./prompts
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/consolidator/bin:$PATH \
    CONSOLIDATOR_HOME=/var/lib/consolidator \
    CONSOLIDATOR_SESSIONS_DIRS=/sessions

# A fixed non-root uid, so that volume ownership is predictable. The memory folder exists in
# the image with the right owner and mode: a named volume mounted there starts with both.
RUN groupadd --system --gid 10001 consolidator \
    && useradd --system --uid 10001 --gid consolidator --home-dir /var/lib/consolidator \
        --no-create-home --shell /usr/sbin/nologin consolidator \
    && mkdir -p /var/lib/consolidator/memories /sessions \
    && chown -R consolidator:consolidator /var/lib/consolidator \
    && chmod 0700 /var/lib/consolidator /var/lib/consolidator/memories

COPY --from=build /dist/ /tmp/dist/
RUN python -m venv /opt/consolidator \
    && /opt/consolidator/bin/pip install --no-cache-dir /tmp/dist/*.whl \
    && rm -rf /tmp/dist

USER consolidator
WORKDIR /var/lib/consolidator

# The daemon serves /metrics and /healthz here (CMD below binds it on every interface so that
# Prometheus can scrape it from another container; publish the port only where you need it).
EXPOSE 9464
# /healthz answers 503 when the database is unreachable or no pass has shown progress lately;
# urlopen raises on a 503 or a refused connection, so the check exits non-zero.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=5)"]

# `docker stop` sends SIGTERM, then SIGKILL after its timeout (10 s unless told otherwise):
# give `docker stop -t` (or compose's stop_grace_period) more than
# CONSOLIDATOR_SHUTDOWN_GRACE_SECONDS so that work in flight can finish or be given back.
STOPSIGNAL SIGTERM
ENTRYPOINT ["consolidator"]
CMD ["daemon", "--metrics-port", "9464", "--metrics-host", "0.0.0.0"]
