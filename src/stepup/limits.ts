import { randomUUID } from "node:crypto";
import type { StepUpSettings } from "./settings.js";
import { refusedBy } from "../errors.js";
import { takeWindows, tooManyAttempts } from "../otp/code.js";
import { WindowKeys } from "../otp/keys.js";
import type { Keys, RedisClient } from "../redis/client.js";
import type { Identifier, StepUpCodes } from "./needs.js";

/**
 * Step-up's abuse limits, per user and per session (STEPUP_LIMIT_USER, STEPUP_LIMIT_SESSION):
 * on the codes its steps send, and on the calls its decisions make to an app's hook.
 */
export class StepUpLimits {
  constructor(
    private readonly deps: {
      config: Pick<StepUpSettings, "STEPUP_LIMIT_USER" | "STEPUP_LIMIT_SESSION">;
      redis: RedisClient;
      keys: Keys;
      codes: Pick<StepUpCodes, "allowSend">;
    },
  ) {}

  /** One more step-up code for this user and session: the same refusals as a login's. */
  async allowStep(appId: string, userId: string, sessionId: string, id: Identifier): Promise<void> {
    const { config, keys } = this.deps;
    const rl = new WindowKeys(keys);
    await this.deps.codes.allowSend(appId, id, [
      { key: rl.stepUp(userId), rule: config.STEPUP_LIMIT_USER, name: "STEPUP_LIMIT_USER" },
      {
        key: rl.stepUp(userId, sessionId),
        rule: config.STEPUP_LIMIT_SESSION,
        name: "STEPUP_LIMIT_SESSION",
      },
    ]);
  }

  /**
   * One more delegated step-up decision for this user and session: each calls the app's hook, so
   * they share the step-up windows' rules (STEPUP_LIMIT_USER, STEPUP_LIMIT_SESSION).
   */
  allowHookCall(userId: string, sessionId: string): Promise<void> {
    const rl = new WindowKeys(this.deps.keys);
    return this.take(rl.hookCalls(userId), rl.hookCalls(userId, sessionId));
  }

  /** One more `verify_passkey` step opened for this user and session: the windows of the steps' codes. */
  allowPasskeyStep(userId: string, sessionId: string): Promise<void> {
    const rl = new WindowKeys(this.deps.keys);
    return this.take(rl.stepUp(userId), rl.stepUp(userId, sessionId));
  }

  private async take(userKey: string, sessionKey: string): Promise<void> {
    const { config, redis } = this.deps;
    const { waitMs, full } = await takeWindows(
      redis,
      [
        { key: userKey, rule: config.STEPUP_LIMIT_USER, name: "STEPUP_LIMIT_USER" },
        { key: sessionKey, rule: config.STEPUP_LIMIT_SESSION, name: "STEPUP_LIMIT_SESSION" },
      ],
      randomUUID(),
    );
    if (waitMs === 0) return;
    throw refusedBy(full?.name, tooManyAttempts("too many step-up requests: try again later", waitMs));
  }
}
