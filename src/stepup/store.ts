import type { Keys, RedisClient } from "../redis/client.js";
import { StoredStepUpConfig, type StepUpConfig } from "./config.js";

/** Each app's step-up configuration, validated before it is put: `app:{<app_id>}:stepup`, JSON. */
export class StepUpConfigStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  private key(appId: string): string {
    return this.keys.key("app", appId, "stepup");
  }

  async get(appId: string): Promise<StepUpConfig | undefined> {
    const raw = await this.redis.get(this.key(appId));
    return raw === null ? undefined : StoredStepUpConfig.parse(JSON.parse(raw));
  }

  /** Replaces the app's configuration whole. */
  async put(appId: string, config: StepUpConfig): Promise<void> {
    await this.redis.set(this.key(appId), JSON.stringify(config));
  }
}
