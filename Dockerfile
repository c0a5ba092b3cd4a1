# syntax=docker/dockerfile:1

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the sources, and so the build that `prepare` runs, come later.
# npm install follows the lock file; npm ci would also demand buf's optional binaries for other
# platforms, which the lock file cannot list when they were not reachable where it was made.
RUN npm install --no-audit --no-fund --ignore-scripts
COPY . .
# src/gen and envoy/descriptor.binpb come from proto/ (buf ships with the dev dependencies).
RUN mkdir -p envoy && npm run generate && npm run build

FROM node:20-bookworm-slim
WORKDIR /app
ENV HOST=0.0.0.0
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
# The service reads the descriptor from <package root>/envoy/descriptor.binpb (reflection, gateway).
COPY --from=build /app/envoy/descriptor.binpb ./envoy/descriptor.binpb
USER node
EXPOSE 50051 8080
CMD ["node", "dist/cli.js", "serve"]
