#!/usr/bin/env node
// `ringfence`: the entry point. Tracing, when the OTEL_* variables ask for it, starts before the
// commands (and through them the app, grpc-js, node:http and ioredis) are imported, so that its
// instrumentation can patch them as they load.
import { startTracing } from "./observability/tracing.js";

if (process.argv[2] === "serve") await startTracing();
const { runCommandLine } = await import("./commands.js");
await runCommandLine();
