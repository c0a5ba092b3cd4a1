import type { Config } from "../config.js";
import { noteRefusal } from "../observability/calls.js";
import type { Secrets } from "../crypto/secrets.js";
import { RingfenceError } from "../errors.js";
import type { RedisClient } from "../redis/client.js";
import { checkCode, hashCode, newCode } from "./code.js";

/**
 * A one-time-code challenge of the session service (a login, a step-up step): issued with its
 * code hashed, the code sent, and the challenge dropped again when sending failed, so no
 * challenge waits for a code that never left; then checked, each refusal its own error.
 */
export async function issueChallenge<C extends { key: string }>(
  deps: { secrets: Secrets; config: Pick<Config, "OTP_LENGTH"> },
  steps: {
    /** Stores the challenge with the code's hash (keyed by the challenge's own id). */
    create: (codeHash: (id: string) => string) => Promise<C>;
    send: (code: string) => Promise<void>;
    remove: (key: string) => Promise<void>;
  },
): Promise<C> {
  const code = newCode(deps.config.OTP_LENGTH);
  const challenge = await steps.create((id) => hashCode(deps.secrets, id, code));
  try {
    await steps.send(code);
  } catch (err) {
    await steps.remove(challenge.key);
    throw err;
  }
  return challenge;
}

/** Checks a code against a challenge and turns each refusal into its error. */
export async function checkChallenge(
  deps: { redis: RedisClient; secrets: Secrets; config: Pick<Config, "OTP_MAX_CHECKS"> },
  challenge: { key: string; id: string },
  code: string,
): Promise<void> {
  const { status } = await checkCode(
    deps.redis,
    { challenge: challenge.key },
    {
      now: Date.now(),
      codeHash: hashCode(deps.secrets, challenge.id, code),
      maxChecks: deps.config.OTP_MAX_CHECKS,
    },
  );
  if (status === "valid") return;
  if (status === "invalid") throw new RingfenceError("invalid_code", "the code is not right");
  if (status === "rate_limited") {
    noteRefusal("OTP_MAX_CHECKS");
    throw new RingfenceError("too_many_attempts", "too many wrong codes: start again");
  }
  throw new RingfenceError("expired_challenge", "unknown, used or expired challenge_token");
}
