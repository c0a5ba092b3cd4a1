import type { ReferenceArgs } from "./token-claims.js";

/**
 * The side of a forked bench process (a reference server or a load driver): it exits when the
 * bench's IPC channel closes, so no reference outlives the bench, even one killed with SIGKILL.
 */
export function exitWithParent(): void {
  if (process.send === undefined) {
    process.stderr.write("this module is started by bench/bench.ts (it needs an IPC channel)\n");
    process.exit(2);
  }
  process.on("disconnect", () => process.exit(0));
}

/** Sends one message to the bench. */
export function tell(message: unknown): void {
  process.send?.(message);
}

/** The reference's credentials and scope, as the bench passes them: one JSON object in argv[2]. */
export function referenceArgs(): ReferenceArgs {
  return JSON.parse(process.argv[2] ?? "{}") as ReferenceArgs;
}

/** What a reference server tells the bench once it listens. */
export interface Ready {
  ready: true;
  port: number;
}

/** What the bench passes the send floor (ref-send-floor.ts): one JSON object in argv[2]. */
export interface SendFloorArgs {
  redisUrl: string;
  /** The stand-in provider the service sends to; the floor POSTs to its /sms too. */
  providerUrl: string;
}
