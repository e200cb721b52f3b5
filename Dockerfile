# syntax=docker/dockerfile:1
# The platform image: one image for both apps. APP=web or APP=backend picks the app (APP=all, the
# default, runs both in one process); docs/production.md "Images".
#
#   docker build -t agent-platform .
#   docker run -e APP=web -e DATABASE_URL=… -p 3000:3000 agent-platform

# ---- build: dev dependencies, server compiled to dist/, dashboard built ----
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# package.json allowScripts names the install scripts that may run (docs/configuration.md)
RUN npm ci --no-audit --no-fund
COPY . .
# `npm start` builds into hashed folders behind the dist links (scripts/lib/switch-build.ts); an
# image is built once, so the server goes straight into a plain folder and the dashboard's link is
# copied as the folder it points to
RUN node --disable-warning=ExperimentalWarning scripts/build-server.ts build/dist \
 && node scripts/build-dashboard.ts \
 && cp -rL dashboard/dist build/dashboard \
 && npm prune --omit=dev --no-audit --no-fund

# ---- runtime: production dependencies and the built trees only ----
FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    DATA_DIR=/data \
    LOG_FORMAT=json
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/build/dist ./dist
COPY --from=build /app/build/dashboard ./dashboard/dist
# bubblewrap: the local driver runs every agent in its sandbox and refuses to start agents without
# one (docs/agents.md "Sandbox"). As the image's non-root user it builds the sandbox in a user
# namespace, which a container may create only with the options compose.yaml gives it
# (docs/production.md "Compose"); with the docker or kubernetes driver it is not used
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap \
 && rm -rf /var/lib/apt/lists/*
# DATA_DIR holds the start-up lock and, without DATABASE_URL, the embedded database: the one folder
# the platform writes; everything under /app stays owned by root and read-only to the process
RUN mkdir -p /data && chown 1000:1000 /data
VOLUME ["/data"]
# the base image's `node` user, by number so Kubernetes' runAsNonRoot can check it
USER 1000:1000
# WEB_PORT, BACKEND_PORT
EXPOSE 3000 3001
# web: GET /api/health; backend: GET /health (both public, §4.12)
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "const b=process.env.APP==='backend';const u=b?`http://127.0.0.1:${process.env.BACKEND_PORT||3001}/health`:`http://127.0.0.1:${process.env.WEB_PORT||3000}/api/health`;fetch(u).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
