import type { CodeSender } from "../session/delivery.js";
import type { SessionStore } from "../session/sessions.js";
import type { UserStore } from "../session/users.js";
import type { CallerAuthenticator } from "../rpc/binding.js";
import type { Caller } from "../session/tokens.js";
import type { Passkeys } from "../passkeys/passkeys.js";

/** The authentication levels of sessions (docs/session-api.md#authentication-level). */
export { ACR_VALUES, type Acr, type SessionLogin } from "../session/sessions.js";

/** The user and session of a call, as the session chain put them on its context. */
export { userOf } from "../session/tokens.js";

/** The password rules and hashing a password change applies. */
export { checkPasswordPolicy, hashPassword } from "../session/password.js";

/**
 * What step-up needs of the session module, declared in one place: the identity terms it shares,
 * the sessions it grants scopes on, the users whose identifiers it sends codes to, the code
 * sender and the chain that authenticates users. Every other step-up file imports these from here.
 */
export {
  GRANT_MODES,
  IDENTIFIER_TYPES,
  PASSWORD_SCOPE,
  type GrantMode,
  type Identifier,
  type IdentifierType,
} from "../session/identity.js";

/** The sessions step-up reads and grants scopes on. */
export type StepUpSessions = Pick<
  SessionStore,
  "alive" | "describe" | "grant" | "keysOf" | "scopes" | "resetPassword"
>;

/** The passkeys a `verify_passkey` step asks for (src/passkeys/). */
export type StepUpPasskeys = Pick<Passkeys, "holdsAny" | "stepOptions" | "read" | "assert">;

/** The users whose identifiers a step receives its code on. */
export type StepUpUsers = Pick<UserStore, "get">;

/** Sends a step's code under the session abuse limits (spam rules, message counts, check windows). */
export type StepUpCodes = Pick<CodeSender, "send" | "allowSend" | "allowCheck" | "converted">;

/** What the session module brings step-up (src/session/module.ts): its code sender and user chain. */
export interface StepUpSessionModule {
  codes: StepUpCodes;
  authenticate: CallerAuthenticator<Caller>;
}
