import type { CodeSender } from "../session/delivery.js";
import type { SessionStore } from "../session/sessions.js";
import type { UserStore } from "../session/users.js";

/**
 * What step-up needs of the session module, declared in one place: the identity terms it shares,
 * the sessions it grants scopes on, the users whose identifiers it sends codes to, and the code
 * sender. Every other step-up file imports these from here.
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
export type StepUpSessions = Pick<SessionStore, "alive" | "grant" | "keysOf" | "scopes" | "resetPassword">;

/** The users whose identifiers a step receives its code on. */
export type StepUpUsers = Pick<UserStore, "get">;

/** Sends a step's code under the session abuse limits (spam rules, message counts, check windows). */
export type StepUpCodes = Pick<CodeSender, "send" | "allowSend" | "allowCheck">;
