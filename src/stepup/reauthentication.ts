/**
 * RFC 9470 on the step-up request (docs/session-api.md#authentication-level): `acr_values` and
 * `max_age` turn a `continue` into a challenge when the session's level is lower than asked or
 * its authentication older.
 */
import { badField } from "../errors.js";
import type { StepUpConfig } from "./config.js";
import { matches, type Holdings } from "./decide.js";
import { ACR_VALUES, type Acr, type SessionLogin } from "./needs.js";
import { EXPIRATION_DURATION, PASSKEY_STEP, type Step } from "./rules.js";

/** What a step-up request asks of the session's authentication. */
export interface AuthRequest {
  /** The lowest level named in acr_values: a session at it or above meets it. */
  acr?: Acr;
  maxAge?: number;
}

const RANK: Readonly<Record<Acr, number>> = { "1": 1, "2": 2 };

/** The request's acr_values and max_age, checked; undefined when it names neither. */
export function readAuthRequest(req: {
  acrValues: string;
  maxAge?: number | undefined;
}): AuthRequest | undefined {
  const wanted: AuthRequest = {};
  const values = req.acrValues.split(" ").filter((v) => v !== "");
  for (const v of values) {
    if (!(ACR_VALUES as readonly string[]).includes(v)) {
      throw badField(
        "acr_values",
        `must list levels of ${ACR_VALUES.map((a) => `"${a}"`).join(", ")}, space-separated`,
      );
    }
  }
  const levels = values as Acr[];
  if (levels.length > 0) wanted.acr = levels.reduce((a, b) => (RANK[b] < RANK[a] ? b : a));
  if (req.maxAge !== undefined) {
    if (!Number.isInteger(req.maxAge) || req.maxAge < 0)
      throw badField("max_age", "must be a whole number of seconds, 0 or more");
    wanted.maxAge = req.maxAge;
  }
  return wanted.acr === undefined && wanted.maxAge === undefined ? undefined : wanted;
}

/** Whether the session's authentication falls short of what is asked (an ended session does). */
export function needsAuthentication(
  wanted: AuthRequest,
  login: SessionLogin | undefined,
  nowMs = Date.now(),
): boolean {
  if (login === undefined) return true;
  if (wanted.acr !== undefined && RANK[login.acr] < RANK[wanted.acr]) return true;
  if (wanted.maxAge === undefined) return false;
  return wanted.maxAge === 0 || Math.floor(nowMs / 1000) - login.authTime > wanted.maxAge;
}

/**
 * The steps of a challenge that acr_values or max_age asked for: those of the first `review`
 * entry of the scope that the user matches, else one step the user can complete: a passkey, else
 * an SMS code, else an email code. Empty when the user can complete none.
 */
export function reauthenticationSteps(
  config: StepUpConfig | undefined,
  scope: string,
  held: Holdings,
  codeTtlSeconds: number,
): Step[] {
  const review = config?.entries.find(
    (e) => e.mode === "direct" && e.scope === scope && e.status === "review" && matches(e, held),
  );
  if (review?.mode === "direct") return review.steps;
  const seconds = Math.min(Math.max(codeTtlSeconds, EXPIRATION_DURATION.min), EXPIRATION_DURATION.max);
  if (held.passkey) return [{ order: 1, key: PASSKEY_STEP, expirationDuration: 300 }];
  if (held.identifierTypes.has("phone_number"))
    return [{ order: 1, key: "verify_sms", expirationDuration: seconds }];
  if (held.identifierTypes.has("email_address"))
    return [{ order: 1, key: "verify_email", expirationDuration: seconds }];
  return [];
}
