import { AppKeys } from "../apps/keys.js";
import { ChallengeKeys } from "../otp/keys.js";
import type { Keys } from "../redis/client.js";

/**
 * Every key step-up reads or writes: its own tokens, and the challenges and app configuration
 * that their owners name (src/otp/keys.ts, src/apps/keys.ts).
 */
export class StepUpKeys {
  private readonly challenges: ChallengeKeys;
  private readonly apps: AppKeys;

  constructor(private readonly keys: Keys) {
    this.challenges = new ChallengeKeys(keys);
    this.apps = new AppKeys(keys);
  }

  /** A step-up challenge, under its user's hash tag. */
  challenge(userId: string, id: string): string {
    return this.challenges.stepUp(userId, id);
  }

  /** The step-up token of a completed challenge (`hash`: of its secret), redeemed once. */
  token(userId: string, hash: string): string {
    return this.keys.key("sut", userId, hash);
  }

  /** The app's step-up configuration. */
  config(appId: string): string {
    return this.apps.stepUpConfig(appId);
  }
}
