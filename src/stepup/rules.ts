import { GRANT_MODES, type GrantMode, type IdentifierType } from "./needs.js";
/**
 * The step-up vocabulary and the rules a decision must keep, whether it comes from a direct entry
 * of the configuration or from a delegation hook (docs/session-api.md#step-up-configuration-limits).
 */

/** The identifier a built-in step-up step sends its code to; other keys cannot be completed here. */
export const STEP_IDENTIFIER: Readonly<Record<string, IdentifierType>> = {
  verify_email: "email_address",
  verify_sms: "phone_number",
};

/** The step a passkey completes (docs/session-api.md#passkeys-in-step-up): no identifier, a passkey of the app. */
export const PASSKEY_STEP = "verify_passkey";

export const STATUSES = ["continue", "review", "block"] as const;
export type Status = (typeof STATUSES)[number];

/** docs/session-api.md#step-up-configuration-limits: 0 to 86400 seconds. */
export const GRANTED_FOR = { min: 0, max: 86_400 } as const;

/**
 * Seconds a user has to complete one step (bounds of our own, docs/session-api.md#step-up-configuration-limits): 30 s is the
 * least in which a code can arrive and be typed, and an hour is the most a one-time code should live.
 */
export const EXPIRATION_DURATION = { min: 30, max: 3_600 } as const;

/** Steps of one decision: a challenge longer than this is a mistake, not a design. */
export const MAX_STEPS = 10;

/**
 * A step key: `verify_email`, `verify_sms`, `verify_passkey`, or a custom key of this shape. Only
 * those three can be completed by this service; a custom key is accepted
 * (docs/session-api.md#step-up-configuration allows it) but a challenge that reaches it cannot go further here.
 */
export const STEP_KEY = /^[a-z][a-z0-9_]{0,63}$/;

export interface Step {
  /** Position, 1..n. */
  order: number;
  key: string;
  /** Seconds, within EXPIRATION_DURATION. */
  expirationDuration: number;
}

/** What a step-up request resolves to. */
export interface Decision {
  status: Status;
  /** Seconds the scope is granted. */
  grantedFor: number;
  grantMode: GrantMode;
  /** Sorted by order; empty unless status is `review`. */
  steps: Step[];
}

/** A broken rule: `field` is relative to the object checked (e.g. `steps[1].order`). */
export interface Problem {
  field: string;
  message: string;
}

export function isOneOf<T extends string>(values: readonly T[], value: unknown): value is T {
  return (values as readonly unknown[]).includes(value);
}

/**
 * Checks a decision's status, granted_for, grant_mode and steps, in that order, and answers the
 * first breach, or the decision with its steps sorted. `identifierTypes` are those the step codes
 * may go to: a `verify_email` step needs `email_address` among them and `verify_sms` `phone_number`.
 */
export function checkDecision(
  d: { status: string; grantedFor: number; grantMode: string; steps: readonly Step[] },
  identifierTypes: ReadonlySet<string>,
): { decision: Decision } | { problem: Problem } {
  const { status, grantedFor, grantMode, steps } = d;
  if (!isOneOf(STATUSES, status)) {
    return { problem: { field: "status", message: `must be one of ${STATUSES.join(", ")}` } };
  }
  if (!Number.isInteger(grantedFor) || grantedFor < GRANTED_FOR.min || grantedFor > GRANTED_FOR.max) {
    const message = `must be an integer from ${GRANTED_FOR.min} to ${GRANTED_FOR.max} seconds`;
    return { problem: { field: "granted_for", message } };
  }
  if (!isOneOf(GRANT_MODES, grantMode)) {
    return { problem: { field: "grant_mode", message: `must be one of ${GRANT_MODES.join(", ")}` } };
  }
  const problem = stepsProblem(status, steps, identifierTypes);
  if (problem !== undefined) return { problem };
  return { decision: { status, grantedFor, grantMode, steps: sortSteps(steps) } };
}

function stepsProblem(
  status: Status,
  steps: readonly Step[],
  identifierTypes: ReadonlySet<string>,
): Problem | undefined {
  if (status === "review" && steps.length === 0) {
    return { field: "steps", message: "a review needs at least one step" };
  }
  if (status !== "review" && steps.length > 0) {
    return { field: "steps", message: `a ${status} decision has no steps` };
  }
  if (steps.length > MAX_STEPS) {
    return { field: "steps", message: `must have at most ${MAX_STEPS} steps` };
  }
  const seen = new Set<number>();
  for (const [i, step] of steps.entries()) {
    const at = `steps[${i}]`;
    // n distinct orders within 1..n are exactly 1..n: no gap is possible.
    if (!Number.isInteger(step.order) || step.order < 1 || step.order > steps.length) {
      return { field: `${at}.order`, message: `orders must be exactly 1 to ${steps.length}` };
    }
    if (seen.has(step.order)) {
      return { field: `${at}.order`, message: `order ${step.order} appears twice` };
    }
    seen.add(step.order);
    if (!STEP_KEY.test(step.key)) {
      return {
        field: `${at}.key`,
        message:
          "must be verify_email, verify_sms, verify_passkey or a custom key matching ^[a-z][a-z0-9_]{0,63}$",
      };
    }
    const needs = STEP_IDENTIFIER[step.key];
    if (needs !== undefined && !identifierTypes.has(needs)) {
      return { field: `${at}.key`, message: `${step.key} needs the identifier type ${needs}` };
    }
    const e = step.expirationDuration;
    if (!Number.isInteger(e) || e < EXPIRATION_DURATION.min || e > EXPIRATION_DURATION.max) {
      return {
        field: `${at}.expiration_duration`,
        message: `must be an integer from ${EXPIRATION_DURATION.min} to ${EXPIRATION_DURATION.max} seconds`,
      };
    }
  }
  return undefined;
}

/** The steps in the order the user takes them. */
function sortSteps(steps: readonly Step[]): Step[] {
  return steps
    .map(({ order, key, expirationDuration }) => ({ order, key, expirationDuration }))
    .sort((a, b) => a.order - b.order);
}
