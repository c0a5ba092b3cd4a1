import { loadConfig } from "../config.js";
import { createLogger } from "../log.js";
import type { OpenStores } from "../command/command.js";
// The app (every domain, its data files, gRPC, the queue) loads only for the commands that use it.
import type { Registry } from "../app.js";

/** The stores every domain shares, as the service opens them (its data sealed with SECRETS_KEY). */
export const withRegistry: OpenStores<Registry> = async (fn) => {
  const config = loadConfig();
  const { openRegistry } = await import("../app.js");
  const registry = await openRegistry(config, createLogger("warn"));
  try {
    await fn(registry);
  } finally {
    await registry.redis.quit().catch(() => undefined);
  }
};
