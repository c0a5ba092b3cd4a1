import { format } from "node:util";
import { pino, stdTimeFunctions, type Logger as Pino } from "pino";

/**
 * One JSON line per event on stderr (pino), so stdout stays free for the CLI's JSON answers.
 * Every line carries the fields of the providers added with `addLogFields` (the running call's
 * request id, the trace), and secrets are replaced by `[redacted]` whatever the caller passed.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /**
   * An `info` line whose fields the caller built from values that are never secret (the request
   * log's): written without the redaction walk, since it is written once per call.
   */
  infoPlain?(msg: string, fields: Record<string, unknown>): void;
  /**
   * For a process about to exit: writes every line still queued, in order, then writes no more,
   * so that `process.exit` cuts no line.
   */
  close?(): Promise<void>;
}

/**
 * `log` with `fields` on every line it writes (a field the line gives itself wins): the lines
 * written while a call runs name it (src/observability/calls.ts). One object whose methods are
 * its class's, since one is made per call.
 */
export function withFields(log: Logger, fields: Record<string, unknown>): Logger {
  return new FieldsLog(log, fields);
}

class FieldsLog implements Logger {
  constructor(
    private readonly log: Logger,
    private readonly fields: Record<string, unknown>,
  ) {}

  debug(msg: string, own?: Record<string, unknown>): void {
    this.log.debug(msg, this.merged(own));
  }

  info(msg: string, own?: Record<string, unknown>): void {
    this.log.info(msg, this.merged(own));
  }

  warn(msg: string, own?: Record<string, unknown>): void {
    this.log.warn(msg, this.merged(own));
  }

  error(msg: string, own?: Record<string, unknown>): void {
    this.log.error(msg, this.merged(own));
  }

  private merged(own: Record<string, unknown> | undefined): Record<string, unknown> {
    return own === undefined ? this.fields : { ...this.fields, ...own };
  }
}

/** Fields for the line being written, from the context it is written in; undefined adds none. */
export type LogFields = () => Record<string, unknown> | undefined;

const providers: LogFields[] = [];

/** Adds fields to every line of every logger, read as each line is written. */
export function addLogFields(provider: LogFields): void {
  providers.push(provider);
}

function contextFields(): Record<string, unknown> {
  let fields: Record<string, unknown> = {};
  for (const provide of providers) {
    const more = provide();
    if (more !== undefined) fields = { ...fields, ...more };
  }
  return fields;
}

/**
 * Names whose values are secrets wherever they appear in a line's fields: codes, keys, client
 * secrets, tokens, passwords, credentials headers. `code` alone is not one: it is an error code.
 */
const SECRET_KEY =
  /^(otp|otp_code|check_code|verification_code|secret|client_secret|webhook_secret|api_key|apikey|x-api-key|management_api_key|password|new_password|current_password|old_password|token|access_token|refresh_token|id_token|step_up_token|challenge_token|authorization|proxy-authorization|cookie|set-cookie|secrets_key|private_key|d)$|(_secret|_token|_password|_key)$/i;
/** The password of a URL's userinfo (`redis://user:pw@host`). */
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@]*:)[^@\s/]+@/gi;

/** What a log line says of a thrown value: an Error's message (and its cause's), else the value as text. */
export function errorMessage(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
  return `${err.message}${cause}`;
}

export const REDACTED = "[redacted]";

/** `value` with every secret field replaced and URL passwords masked, to a small depth. */
export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return value.includes("@") ? value.replace(URL_PASSWORD, "$1***@") : value;
  if (value === null || typeof value !== "object" || depth > 4) return value;
  if (value instanceof Error) return redact(`${value.name}: ${value.message}`, depth);
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) ? REDACTED : redact(v, depth + 1);
  return out;
}

/**
 * `context` goes on every line, e.g. `{worker, pid}` in a cluster worker. `write` receives each
 * whole line (tests capture them); by default lines go to stderr.
 */
export function createLogger(
  level: LogLevel,
  write?: (line: string) => void,
  context: Record<string, unknown> = {},
): Logger {
  const options = {
    level,
    base: context,
    timestamp: stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    mixin: contextFields,
  };
  // Synchronous (SonicBoom): each line is one write(2) on the calling thread. Asynchronous writes
  // cost more than they save, each batch a hand-off to libuv's pool and back: synchronous ones
  // gave about 5 % more gRPC tokens a second at 8 % less CPU each
  // (docs/benchmark.md#what-a-call-pays-for-on-node-20), and leave no line in a buffer at a crash.
  const destination = write === undefined ? pino.destination({ dest: 2, sync: true }) : undefined;
  const logger: Pino = write === undefined ? pino(options, destination) : pino(options, { write });
  // The context's members as they follow the time in every line: `,"worker":1,"pid":42`.
  const base = Object.keys(context).length === 0 ? "" : `,${JSON.stringify(context).slice(1, -1)}`;
  let closed = false;
  const emit =
    (lvl: LogLevel) =>
    (msg: string, fields?: Record<string, unknown>): void => {
      if (closed || !logger.isLevelEnabled(lvl)) return;
      if (fields === undefined) logger[lvl](msg);
      else logger[lvl](redact(fields) as Record<string, unknown>, msg);
    };
  return {
    debug: emit("debug"),
    info: emit("info"),
    warn: emit("warn"),
    error: emit("error"),
    infoPlain: (msg, fields) => {
      if (closed || !logger.isLevelEnabled("info")) return;
      // The line pino would write, put together by hand since it is written once per call: level,
      // time, the logger's context, the providers' fields (a field of the line's own wins), the
      // line's other fields, msg.
      const provided = contextFields();
      let line = `{"level":"info","time":"${isoNow()}"${base}`;
      for (const key in provided) line += member(key, key in fields ? fields[key] : provided[key]);
      for (const key in fields) if (!(key in provided)) line += member(key, fields[key]);
      line += `,"msg":${JSON.stringify(msg)}}\n`;
      if (destination !== undefined) destination.write(line);
      else write?.(line);
    },
    close: () => {
      if (closed || destination === undefined) {
        closed = true;
        return Promise.resolve();
      }
      closed = true;
      // end() writes anything still queued, then closes (stderr stays open).
      return new Promise<void>((resolve) => {
        const late = setTimeout(resolve, CLOSE_WAIT_MS);
        destination.once("close", () => {
          clearTimeout(late);
          resolve();
        });
        destination.end();
      });
    },
  };
}

/** `,"key":value` as JSON.stringify writes a member; nothing for a value it leaves out. */
function member(key: string, value: unknown): string {
  const json =
    typeof value === "string" ? JSON.stringify(value) : (JSON.stringify(value) as string | undefined);
  return json === undefined ? "" : `,${JSON.stringify(key)}:${json}`;
}

let lastMs = 0;
let lastIso = "";

/** The time as pino's isoTime writes it, made once per millisecond however many lines share it. */
function isoNow(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastIso = new Date(now).toISOString();
  }
  return lastIso;
}

/** The longest `close` waits for the last lines (a stalled stderr must not hold an exit). */
const CLOSE_WAIT_MS = 2_000;

/**
 * For a process whose stderr is its log (`serve`): what it would write as plain text goes through
 * `log` instead, so that every line is one JSON object. Process warnings (Node's printer is
 * replaced), and the console, where libraries write (ioredis, BullMQ, grpc-js's default logger).
 */
export function routeProcessOutput(log: Logger): void {
  process.removeAllListeners("warning");
  process.on("warning", (warning) => {
    log.warn("process warning", { name: warning.name, warning: warning.message });
  });
  const to =
    (level: LogLevel) =>
    (...args: unknown[]): void => {
      log[level]("console", { text: format(...args) });
    };
  console.error = to("error");
  console.warn = to("warn");
  console.log = to("info");
  console.info = to("info");
  console.debug = to("debug");
  console.trace = to("debug");
}

export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
