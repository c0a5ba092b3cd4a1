import type { Keys, RedisClient } from "../redis/client.js";
import { StoredStepUpConfig, type StepUpConfig } from "./config.js";
import { StepUpKeys } from "./keys.js";

/** Each app's step-up configuration, validated before it is put: `app:{<app_id>}:stepup`, JSON. */
export class StepUpConfigStore {
  private readonly keys: StepUpKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
  ) {
    this.keys = new StepUpKeys(keys);
  }

  async get(appId: string): Promise<StepUpConfig | undefined> {
    const raw = await this.redis.get(this.keys.config(appId));
    return raw === null ? undefined : StoredStepUpConfig.parse(JSON.parse(raw));
  }

  /** Replaces the app's configuration whole. */
  async put(appId: string, config: StepUpConfig): Promise<void> {
    await this.redis.set(this.keys.config(appId), JSON.stringify(config));
  }
}
