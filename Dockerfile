# syntax=docker/dockerfile:1

# Node 26 is the Active LTS line (since October 2026; Node 20 left support in April 2026).
FROM node:26-trixie-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the sources, and so the build that `prepare` runs, come later.
# npm install follows the lock file; npm ci would also demand buf's optional binaries for other
# platforms, which the lock file cannot list when they were not reachable where it was made.
RUN npm install --no-audit --no-fund --ignore-scripts
COPY . .
# src/gen and envoy/descriptor.binpb come from proto/ (buf ships with the dev dependencies).
RUN mkdir -p envoy && npm run generate && npm run build

FROM node:26-trixie-slim
WORKDIR /app
# Production: development defaults (log providers, the well-known SECRETS_KEY) are refused at start.
ENV NODE_ENV=production HOST=0.0.0.0 ADMIN_PORT=9464
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
# The service reads the descriptor from <package root>/envoy/descriptor.binpb (reflection, gateway).
COPY --from=build /app/envoy/descriptor.binpb ./envoy/descriptor.binpb
USER node
EXPOSE 50051 8080 9464
# Ready: the process answers, Redis is reachable and it is not draining (the admin port's /readyz).
# The slim image has no curl: Node asks instead. With ADMIN_PORT=0 it asks the gRPC health service.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "dist/healthcheck.js"]
CMD ["node", "dist/cli.js", "serve"]
