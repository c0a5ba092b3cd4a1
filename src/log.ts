/** One JSON line per event on stderr, so stdout stays free for the CLI's JSON answers. */
const LEVELS = { debug: 10, info: 20, warn: 30, error: 40 } as const;
export type LogLevel = keyof typeof LEVELS;

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** `context` goes on every line after the message, e.g. `{worker, pid}` in a cluster worker. */
export function createLogger(
  level: LogLevel,
  write: (line: string) => void = (l) => process.stderr.write(l),
  context: Record<string, unknown> = {},
): Logger {
  const min = LEVELS[level];
  const emit =
    (lvl: LogLevel) =>
    (msg: string, fields: Record<string, unknown> = {}) => {
      if (LEVELS[lvl] < min) return;
      write(
        JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...context, ...fields }) + "\n",
      );
    };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}

export const silentLogger: Logger = createLogger("error", () => undefined);
