# The serving image: a Vertex AI custom container for models the trainer exported.
#   docker build -f trainer/serve.Dockerfile -t REGION-docker.pkg.dev/PROJECT/REPO/serve:TAG .
# Built like trainer/Dockerfile (same base, same trainer extra), plus the web server. Vertex
# sets AIP_HTTP_PORT, AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE and AIP_STORAGE_URI when it runs it
# (docs/vertex-facts.md, "Serving containers"); the Model's containerSpec needs no command.
ARG BASE_IMAGE=pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/vtx
COPY pyproject.toml README.md ./
COPY trainer ./trainer

# The trainer extra (torch, transformers, peft, gcsfs...) plus the core packages the serving
# entry point uses: the trainer's (config, output) and the web server (fastapi, uvicorn).
RUN python - > /tmp/requirements.txt <<'PY'
import re
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
wanted = {"pyyaml", "pydantic", "rich", "fastapi", "uvicorn"}
core = [r for r in project["dependencies"] if re.split(r"[<>=!~\[ ]", r)[0].lower() in wanted]
print("\n".join(core + project["optional-dependencies"]["trainer"]))
PY
RUN pip install -r /tmp/requirements.txt && pip install --no-deps . && rm /tmp/requirements.txt

# Vertex's default port, for `docker run -p 8080:8080` by hand; Vertex itself sets AIP_HTTP_PORT.
EXPOSE 8080
# Listens on 0.0.0.0:$AIP_HTTP_PORT at once and loads the model in the background; SIGTERM
# (Vertex undeploying or scaling in) stops it after the requests in flight.
ENTRYPOINT ["python", "-m", "trainer.serve"]
