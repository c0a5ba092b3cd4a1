import { randomInt } from "node:crypto";
import type { RedisClient } from "../redis/client.js";
import { defineScript } from "../redis/script.js";
import type { Secrets } from "../crypto/secrets.js";
import { RingfenceError } from "../errors.js";
import { STREAM_LIBRARY, type CorrelatedEnvelope } from "../webhooks/stream.js";

/**
 * The one-time-code machinery shared by the V1 verification, OTP login and step-up: codes are
 * uniformly random digits, stored only as a keyed hash bound to their challenge, and checked by
 * one atomic script that enforces expiry, single success and the attempt limit.
 */
export const CHECK_STATUSES = [
  "valid",
  "invalid",
  "without_attempt",
  "rate_limited",
  "already_validated",
  "expired_auth",
] as const;
export type CheckStatus = (typeof CHECK_STATUSES)[number];

const CODE_PURPOSE = "otp-code";

/** check-code.lua after `libraries`: webhooks/stream.lua, and the event recorder of a caller that has one. */
function checkCodeScript(libraries: readonly URL[]) {
  return defineScript({
    file: new URL("./check-code.lua", import.meta.url),
    libraries,
    keys: ["challenge", "events", "hook", "pending"],
    argv: ["args"],
  });
}
type CheckCodeScript = ReturnType<typeof checkCodeScript>;

/** The check of challenges that record no events (a login, a step-up step). */
const plainCheckScript = checkCodeScript([STREAM_LIBRARY]);

/** Shared sliding-window functions, prepended to every script that limits sends. */
export const WINDOW_LIBRARY = new URL("./window.lua", import.meta.url);
const takeWindowScript = defineScript({
  file: new URL("./take-window.lua", import.meta.url),
  libraries: [WINDOW_LIBRARY],
  keys: [],
  rest: "window",
  argv: ["args"],
});

/** A sliding-window rule (`count/seconds`, as the limit settings say); null when the rule is off. */
export type WindowRule = { limit: number; windowSeconds: number } | null;

export interface Window {
  key: string;
  rule: WindowRule;
  /** The setting the rule comes from (`RATE_LIMIT_NUMBER`), named when the window refuses a call. */
  name?: string;
  /**
   * The window counts only while `key` exists (`exists: true`) or is absent (`false`), as the same
   * script reads it: a key of the windows' hash tag (a user of the app, a known source).
   */
  when?: { key: string; exists: boolean };
}

/** What taking windows gave: `waitMs` 0 when there was room, else which window was full. */
export interface Taken {
  waitMs: number;
  /** The first full window, when one was. */
  full: Window | undefined;
}

/**
 * Takes one use of each window, all or none, atomically (the keys share one hash tag): `waitMs`
 * 0 when taken, else the milliseconds until a place frees (nothing is recorded then). A window
 * whose `when` does not hold is left alone. `peek`
 * only looks; `add` records without looking (failures counted after the fact); `remove` gives
 * back the place `member` took. The V1 send and
 * retry scripts use the same window.lua functions inside their own scripts, since they decide
 * windows atomically with billing.
 */
export async function takeWindows(
  redis: RedisClient,
  windows: readonly Window[],
  member: string,
  mode: "take" | "peek" | "add" | "remove" = "take",
): Promise<Taken> {
  const live = windows.filter((w) => w.rule !== null);
  if (live.length === 0) return { waitMs: 0, full: undefined };
  // The keys the conditions read follow the windows in KEYS; `when` gives their positions.
  const read: string[] = [];
  const when = live.map((w) => {
    if (w.when === undefined) return null;
    const at = read.includes(w.when.key) ? read.indexOf(w.when.key) : read.push(w.when.key) - 1;
    return { key: live.length + at + 1, exists: w.when.exists };
  });
  const args = {
    now: Date.now(),
    rules: live.map((w) => w.rule),
    member,
    mode,
    ...(read.length === 0 ? {} : { when }),
  };
  const [status, waitMs, first] = (await takeWindowScript.run(redis, {}, { args: JSON.stringify(args) }, [
    ...live.map((w) => w.key),
    ...read,
  ])) as ["room"] | ["full", number, number];
  return status === "full" ? { waitMs, full: live[first - 1] } : { waitMs: 0, full: undefined };
}

/** 429 too_many_attempts, with the seconds until a place frees in `Retry-After`. */
export function tooManyAttempts(message: string, waitMs: number): RingfenceError {
  return new RingfenceError("too_many_attempts", message, {
    "retry-after": String(Math.max(1, Math.ceil(waitMs / 1000))),
  });
}

/** A uniformly random code of `length` digits (leading zeros kept). */
export function newCode(length: number): string {
  let code = "";
  for (let i = 0; i < length; i++) code += String(randomInt(10));
  return code;
}

/** The keyed hash a code is stored as; bound to its challenge so equal codes hash apart. */
export function hashCode(secrets: Secrets, challengeId: string, code: string): string {
  return secrets.hash(CODE_PURPOSE, `${challengeId}:${code}`);
}

export interface CheckKeys {
  challenge: string;
  /**
   * With events: the list, hook and pending set they go to, and the envelope of each outcome
   * (completed with the challenge's correlation_id when given as parts; see check-code.lua).
   */
  events?: {
    list: string;
    hook: string;
    pending: string;
    valid: string | CorrelatedEnvelope;
    invalid: string | CorrelatedEnvelope;
    /** The compact records the event recorder may keep instead (see checkCodeWithEvents). */
    compact?: { valid: string; invalid: string };
  };
}

/** What a check is given besides its keys. */
export interface CheckArgs {
  now: number;
  codeHash: string;
  maxChecks: number;
  /** `api`: the API whose verification this must be (another's is `not_found`). */
  api?: string;
}

/** What a check answers; `hooked` says an event awaits webhook delivery. */
export interface CheckResult {
  status: CheckStatus | "not_found";
  hooked: boolean;
  phone?: string;
  /** The provider and route (`<provider> <route>`) that carried the code checked right, when known. */
  carried?: string;
}

/** Checks a code of a challenge that records no events (a login, a step-up step). */
export function checkCode(
  redis: RedisClient,
  keys: { challenge: string },
  args: CheckArgs,
): Promise<CheckResult> {
  return runCheck(plainCheckScript, redis, keys, args);
}

/**
 * The check of a caller whose comparisons are events (`CheckKeys.events`), recorded by `recorder`:
 * a Lua library, prepended after webhooks/stream.lua, that defines
 * `row_event(challengeKey, eventsKey, hookKey, pendingKey, envelope, compact)` and returns like
 * stream_append (the count, and 1 when the event awaits webhook delivery). Made once per recorder.
 */
export function checkCodeWithEvents(
  recorder: URL,
): (redis: RedisClient, keys: CheckKeys, args: CheckArgs) => Promise<CheckResult> {
  const script = checkCodeScript([STREAM_LIBRARY, recorder]);
  return (redis, keys, args) => runCheck(script, redis, keys, args);
}

/** Checks a code; `hooked` says an event awaits webhook delivery. */
async function runCheck(
  script: CheckCodeScript,
  redis: RedisClient,
  keys: CheckKeys,
  args: CheckArgs,
): Promise<CheckResult> {
  const e = keys.events;
  const k = {
    challenge: keys.challenge,
    events: e?.list ?? keys.challenge,
    hook: e?.hook ?? keys.challenge,
    pending: e?.pending ?? keys.challenge,
  };
  const payload = {
    ...args,
    events: e === undefined ? null : { valid: e.valid, invalid: e.invalid, compact: e.compact ?? null },
  };
  const [status, hooked, phone, carried] = (await script.run(redis, k, {
    args: JSON.stringify(payload),
  })) as [CheckStatus | "not_found", number, string | null, string | null];
  return {
    status,
    hooked: hooked === 1,
    ...(typeof phone === "string" ? { phone } : {}),
    ...(typeof carried === "string" ? { carried } : {}),
  };
}
