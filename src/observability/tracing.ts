import { register } from "node:module";
import { addLogFields } from "../log.js";

/**
 * OpenTelemetry tracing, configured by the standard `OTEL_*` variables and off unless an OTLP
 * endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and
 * `OTEL_SDK_DISABLED` is not `true`. It instruments node:http (the built-in gateway and outbound
 * calls), grpc-js and ioredis (command names only: arguments hold numbers and hashed secrets).
 * `ringfence serve` starts it before the app is imported, since instrumentation patches modules
 * as they load; every log line written inside a span then carries `trace_id` and `span_id`.
 * This module imports none of the SDK unless tracing is on.
 */

/** Whether the environment asks for traces. */
export function tracingWanted(env: NodeJS.ProcessEnv): boolean {
  if ((env.OTEL_SDK_DISABLED ?? "").toLowerCase() === "true") return false;
  if ((env.OTEL_TRACES_EXPORTER ?? "").split(",").includes("none")) return false;
  const set = (v: string | undefined) => v !== undefined && v.trim() !== "";
  return set(env.OTEL_EXPORTER_OTLP_ENDPOINT) || set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

export interface Tracing {
  /** Ends and exports the spans still buffered. */
  shutdown(): Promise<void>;
}

let running: Tracing | undefined;

/** Whether this process traces (Redis clients then send each command on its own). */
export function tracingStarted(): boolean {
  return running !== undefined;
}

/** Exports what the tracer still holds, when tracing runs; bounded by `ms`. */
export async function flushTracing(ms = 2_000): Promise<void> {
  if (running === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    running.shutdown().catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<Tracing | undefined> {
  if (!tracingWanted(env)) return undefined;
  // Metrics are Prometheus's on ADMIN_PORT and logs go to stderr: the SDK exports traces only,
  // unless the operator asks it for more.
  env.OTEL_METRICS_EXPORTER ??= "none";
  env.OTEL_LOGS_EXPORTER ??= "none";
  env.OTEL_SERVICE_NAME ??= "ringfence";
  // The app is ESM: modules it imports are patched through import-in-the-middle's loader hook.
  register("@opentelemetry/instrumentation/hook.mjs", import.meta.url);
  const [{ NodeSDK }, { HttpInstrumentation }, { GrpcInstrumentation }, { IORedisInstrumentation }, api] =
    await Promise.all([
      import("@opentelemetry/sdk-node"),
      import("@opentelemetry/instrumentation-http"),
      import("@opentelemetry/instrumentation-grpc"),
      import("@opentelemetry/instrumentation-ioredis"),
      import("@opentelemetry/api"),
    ]);
  const sdk = new NodeSDK({
    instrumentations: [
      new HttpInstrumentation(),
      new GrpcInstrumentation(),
      // The statement is the command's name alone, never its arguments.
      new IORedisInstrumentation({ dbStatementSerializer: (command) => command }),
    ],
  });
  sdk.start();
  addLogFields(() => {
    const context = api.trace.getActiveSpan()?.spanContext();
    return context === undefined || !api.isSpanContextValid(context)
      ? undefined
      : { trace_id: context.traceId, span_id: context.spanId };
  });
  running = { shutdown: () => sdk.shutdown() };
  return running;
}
