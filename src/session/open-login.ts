import { randomUUID } from "node:crypto";
import type { AppEvents } from "../apps/webhooks.js";
import type { SigningKeys } from "../oauth/keys/signing-keys.js";
import type { CallContext } from "../rpc/binding.js";
import type { Acr, SessionStore } from "./sessions.js";
import type { SessionSettings } from "./settings.js";
import { tokenSet, type TokenSet } from "./tokens.js";

/** How a user just proved who it is: RFC 8176 methods and the level (docs/session-api.md#authentication-level). */
export interface Authenticated {
  userId: string;
  appId: string;
  amr: string[];
  acr: Acr;
}

/**
 * Opens the session of a user who just authenticated without a code (a password, a passkey): its
 * first tokens, and the app's `session.created` event (`new_user: false`: such logins create no user).
 */
export type OpenLogin = (who: Authenticated, call: CallContext) => Promise<TokenSet>;

export function loginOpener(deps: {
  config: Pick<SessionSettings, "SESSION_TOKEN_TTL_SECONDS">;
  issuer: string;
  sessions: Pick<SessionStore, "open">;
  signingKeys: SigningKeys;
  events: Pick<AppEvents, "emit">;
}): OpenLogin {
  return async (who, call) => {
    const jti = randomUUID();
    const opened = await deps.sessions.open(who.userId, who.appId, jti, { amr: who.amr, acr: who.acr });
    await deps.events.emit(
      who.appId,
      "session.created",
      { user_id: who.userId, session_id: opened.sessionId, new_user: false },
      { call },
    );
    return tokenSet(deps.signingKeys, {
      issuer: deps.issuer,
      userId: who.userId,
      sessionId: opened.sessionId,
      appId: who.appId,
      scopes: [],
      jti,
      lifetimeSeconds: deps.config.SESSION_TOKEN_TTL_SECONDS,
      login: opened.login,
      refreshToken: opened.refreshToken,
    });
  };
}
