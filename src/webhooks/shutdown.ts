/** Helpers of the outbox's close: waiting for something until a deadline, and ending a connection. */
import type { RedisClient } from "../redis/client.js";

/** Whether `p` settles (either way) by `deadlineMs`. */
export async function settlesBy(p: Promise<unknown>, deadlineMs: number): Promise<boolean> {
  if (deadlineMs === Number.POSITIVE_INFINITY) {
    await p.catch(() => undefined);
    return true;
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(
      () => {
        resolve(false);
      },
      Math.max(0, deadlineMs - Date.now()),
    );
  });
  const settled = await Promise.race([
    p.then(
      () => true as const,
      () => true as const,
    ),
    late,
  ]);
  clearTimeout(timer);
  return settled;
}

export async function quit(connection: RedisClient | undefined, force = false): Promise<void> {
  if (connection === undefined) return;
  // BullMQ works on duplicates of the worker's connection, which may never have connected itself;
  // one that is not connected now (say still reconnecting) has nothing left to send.
  if (connection.status !== "ready" || force) {
    connection.disconnect();
    return;
  }
  try {
    await connection.quit();
  } catch {
    connection.disconnect();
  }
}
