# One image for both the web (gunicorn) and the worker (celery) services.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 MAST_VAR_DIR=/var/lib/mast
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
RUN mkdir -p /var/lib/mast && SECRET_KEY=build-only DATABASE_URL=postgres://build-only@localhost/none python manage.py collectstatic --noinput >/dev/null
RUN useradd --system --home /app mast && chown -R mast /var/lib/mast
USER mast
EXPOSE 8000
# gthread, 8 threads, keep-alive 30 s: measured for autosaves in bench/bench_saves.py (README "Large projects"); -w = cores
CMD ["gunicorn", "mast_site.wsgi", "-b", "0.0.0.0:8000", "-w", "4", "-k", "gthread", "--threads", "8", "--keep-alive", "30", "--timeout", "120"]
