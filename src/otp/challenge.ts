import { createHash, randomBytes } from "node:crypto";
import type { OtpSettings } from "./settings.js";
import type { Secrets } from "../crypto/secrets.js";
import { refusedBy, RingfenceError } from "../errors.js";
import type { RedisClient } from "../redis/client.js";
import { checkCode, hashCode, newCode } from "./code.js";

/**
 * The secret part of a challenge token (and of step-up's token): 32 random bytes, base64url.
 * Redis keeps only its hash, in the key name, so a dump of Redis holds no usable token.
 */
export const TOKEN_SECRET = "[A-Za-z0-9_-]{43}";

/** A new token secret and the hash its record is keyed by. */
export function newTokenSecret(): { secret: string; hash: string } {
  const secret = randomBytes(32).toString("base64url");
  return { secret, hash: secretHash(secret) };
}

/** The hash of a token secret: a challenge's id, the last part of its key. */
export function secretHash(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

/** How long a challenge's record outlives its expiry. */
const CHALLENGE_KEPT_MS = 3_600_000;

/**
 * Stores a new pending challenge under `keyOf(id)`, its id the hash of a new secret: the domain's
 * own `fields`, then the code's hash and the check state check-code.lua reads. Returns the secret,
 * for the domain's token, and the key.
 */
export async function storeChallenge(
  redis: RedisClient,
  challenge: {
    keyOf: (id: string) => string;
    fields: Record<string, string>;
    expiresAtMs: number;
    codeHash: (id: string) => string;
  },
): Promise<{ secret: string; key: string }> {
  const { secret, hash: id } = newTokenSecret();
  const key = challenge.keyOf(id);
  await redis
    .multi()
    .hset(key, {
      ...challenge.fields,
      code_hash: challenge.codeHash(id),
      status: "pending",
      checks: "0",
      validated: "0",
      expires_at_ms: String(challenge.expiresAtMs),
    })
    .pexpireat(key, challenge.expiresAtMs + CHALLENGE_KEPT_MS)
    .exec();
  return { secret, key };
}

/**
 * A one-time-code challenge of the session service (a login, a step-up step): issued with its
 * code hashed, the code sent, and the challenge dropped again when sending failed, so no
 * challenge waits for a code that never left; then checked, each refusal its own error.
 */
export async function issueChallenge<C extends { key: string }>(
  deps: { secrets: Secrets; config: Pick<OtpSettings, "OTP_LENGTH"> },
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
  deps: { redis: RedisClient; secrets: Secrets; config: Pick<OtpSettings, "OTP_MAX_CHECKS"> },
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
    throw refusedBy(
      "OTP_MAX_CHECKS",
      new RingfenceError("too_many_attempts", "too many wrong codes: start again"),
    );
  }
  throw new RingfenceError("expired_challenge", "unknown, used or expired challenge_token");
}
