import { jwtVerify } from "jose";
import { isRedisUnavailable, RingfenceError } from "../errors.js";
import { callerOf, keyed, type CallContext, type CallerAuthenticator } from "../rpc/binding.js";
import { callerKey } from "../rpc/callers.js";
import { SESSION_TOKEN_TYPE, signAccessToken, type SigningKeys } from "../oauth/keys/signing-keys.js";
import type { CachedKeySet } from "../oauth/keys/key-set.js";
import type { SessionLogin, SessionStore } from "./sessions.js";

export interface Caller {
  userId: string;
  sessionId: string;
  appId: string;
  jti: string;
  scopes: string[];
}

/**
 * A user session access token: header `typ: session+jwt` (never `at+jwt`, so a verifier of
 * server tokens refuses it); claims sub (user), session_id, app_id, scope, amr, acr and auth_time
 * (the login's methods, the session's level and the time of its last authentication, kept across
 * refreshes), signed like server tokens. No `client_id`:
 * that claim names the client of a server token.
 */
export async function issueSessionToken(
  keys: SigningKeys,
  c: {
    issuer: string;
    userId: string;
    sessionId: string;
    appId: string;
    scopes: string[];
    jti: string;
    lifetimeSeconds: number;
    login: SessionLogin;
  },
): Promise<string> {
  const iat = Math.floor(Date.now() / 1000);
  return signAccessToken(
    keys,
    {
      iss: c.issuer,
      sub: c.userId,
      aud: c.appId,
      app_id: c.appId,
      session_id: c.sessionId,
      scope: c.scopes.join(" "),
      amr: c.login.amr,
      acr: c.login.acr,
      auth_time: c.login.authTime,
      iat,
      exp: iat + c.lifetimeSeconds,
      jti: c.jti,
    },
    { typ: SESSION_TOKEN_TYPE },
  );
}

/** A login's or refresh's answer. */
export interface TokenSet {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
  scope: string;
}

/** The answer of a login or refresh: a new access token beside the session's refresh token. */
export async function tokenSet(
  keys: SigningKeys,
  c: Parameters<typeof issueSessionToken>[1] & { refreshToken: string },
): Promise<TokenSet> {
  const accessToken = await issueSessionToken(keys, c);
  return {
    accessToken,
    refreshToken: c.refreshToken,
    expiresIn: c.lifetimeSeconds,
    scope: c.scopes.join(" "),
  };
}

const CHALLENGE = { "www-authenticate": 'Bearer realm="ringfence", error="invalid_token"' };

/**
 * The caller of a user call: a valid session token whose session is still alive in Redis, so a
 * logout or a revoked session applies at once even to tokens already issued. The token must have
 * the header `typ: session+jwt` (a server token, `at+jwt`, is refused) and carry `exp` and `iat`,
 * an `aud` equal to its `app_id`, and no `client_id`, as `issueSessionToken` makes it.
 */
async function authenticateCaller(
  ctx: CallContext,
  deps: { keySet: CachedKeySet; sessions: SessionStore; issuer: string },
): Promise<Caller> {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(ctx.header("authorization") ?? "");
  if (match?.[1] === undefined) {
    throw new RingfenceError("invalid_token", "Authorization: Bearer <access token> is required", {
      "www-authenticate": 'Bearer realm="ringfence"',
    });
  }
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(match[1], deps.keySet.getKey, {
      issuer: deps.issuer,
      typ: SESSION_TOKEN_TYPE,
      requiredClaims: ["exp", "iat", "aud"],
    }));
  } catch (err) {
    // Reading the key set from an unreachable Redis is an outage, not a bad token.
    if (isRedisUnavailable(err)) throw err;
    throw new RingfenceError("invalid_token", "the access token is invalid or expired", CHALLENGE);
  }
  const { sub, session_id: sessionId, app_id: appId, jti, scope, aud } = payload;
  if (
    "client_id" in payload ||
    typeof sub !== "string" ||
    typeof sessionId !== "string" ||
    typeof appId !== "string" ||
    typeof jti !== "string" ||
    aud !== appId
  ) {
    throw new RingfenceError("invalid_token", "not a session access token", CHALLENGE);
  }
  if (!(await deps.sessions.alive(sub, sessionId))) {
    throw new RingfenceError("invalid_token", "the session has ended", CHALLENGE);
  }
  const scopes = typeof scope === "string" && scope !== "" ? scope.split(" ") : [];
  return { userId: sub, sessionId, appId, jti, scopes };
}

/** The authenticator of a user's calls: a session access token (see authenticateCaller). */
export function sessionAuthenticator(deps: {
  keySet: CachedKeySet;
  sessions: SessionStore;
  issuer: string;
}): CallerAuthenticator<Caller> {
  return keyed(SESSION_CALLER, (ctx) => authenticateCaller(ctx, deps));
}

/** The key a user is found under on a call's context: logged by the session's app id. */
export const SESSION_CALLER = callerKey<Caller>("session", (c) => `app:${c.appId}`);

/** The user and session of a call (put on the context by `sessionAuthenticator`). */
export function userOf(ctx: CallContext): Caller {
  return callerOf(ctx, SESSION_CALLER);
}
