import type { Awaitable } from "../awaitable.js";
import { jwtVerify } from "jose";
import { isRedisUnavailable, RingfenceError } from "../errors.js";
import { noStore, type CallContext } from "../rpc/binding.js";
import type { HttpBody } from "../gen/google/api/httpbody.js";
import type { IntrospectTokenResponse } from "../gen/ringfence/oauth/v1/oauth_service.js";
import { authenticateClient, readCredentials, type ClientAuthDeps } from "./client-auth.js";
import type { AuthenticatedClient } from "./clients.js";
import { readForm, stillVouched } from "./grant.js";
import type { CachedKeySet } from "./keys/key-set.js";
import { SERVER_TOKEN_TYPE, SESSION_TOKEN_TYPE } from "./keys/signing-keys.js";

/**
 * What introspection asks of user sessions (the session store answers it): the scopes the
 * session's access token `jti` holds now, or undefined once the session has ended.
 */
export interface SessionScopes {
  tokenScopes(userId: string, sessionId: string, jti: string): Promise<string[] | undefined>;
}

export interface TokenLifecycleDeps extends ClientAuthDeps {
  /** The service's published keys, cached: a token is verified without a Redis round trip. */
  keySet: CachedKeySet;
  /** User sessions, whose access tokens are active while the session is alive. */
  sessions: SessionScopes;
  issuer: string;
}

const FORM = "application/x-www-form-urlencoded";
/** Longer than any token this service signs: a longer one is not verified at all. */
const MAX_TOKEN_CHARS = 8192;

/** The common claims of both kinds of access token, as verified. */
interface Claims {
  sub: string;
  appId: string;
  scope: string;
  iat: number;
  exp: number;
  jti: string;
}

/** An access token this service signed, still within its lifetime. */
type Token =
  | (Claims & { kind: "server"; clientId: string; jkt?: string })
  | (Claims & { kind: "session"; sessionId: string; acr?: string; authTime?: number });

/**
 * POST /v1/session/oauth/introspect (RFC 7662): the calling client authenticated as at the token
 * endpoint (its failures counted in the same windows), then the token's standing. A server token
 * is active when it is of the client's app, its client still exists and it was not revoked: both
 * read in one round trip, the signature checked against the cached key set. A session access
 * token is active while its session is, with its acr and auth_time and the scopes the session
 * holds for it now (one round trip): a single-use scope consumed since the token was issued is gone. Anything else is
 * `{active: false}`.
 */
export async function introspect(
  deps: TokenLifecycleDeps,
  body: { contentType: string; data: Buffer },
  ctx: CallContext,
): Promise<IntrospectTokenResponse> {
  const { token, authenticated, vouch } = await authenticatedRequest(deps, body, ctx);
  const answer = await standing(deps, token, authenticated);
  // As for a token: no answer once a deletion of the calling client has answered.
  await vouch();
  return answer;
}

/**
 * POST /v1/session/oauth/revoke (RFC 7009): a client revokes only the tokens issued to it
 * (section 2.1). A server token of the calling client is revoked until its `exp`; a live token
 * issued to anyone else (another client's, a user's session token) is refused, 400
 * invalid_request, and nothing is revoked; a token this service does not take (unknown,
 * malformed, expired) answers as a revoked one does, 200 with an empty body (section 2.2).
 */
export async function revoke(
  deps: TokenLifecycleDeps,
  body: { contentType: string; data: Buffer },
  ctx: CallContext,
): Promise<HttpBody> {
  const { token, authenticated } = await authenticatedRequest(deps, body, ctx);
  const read = await readToken(deps, token);
  if (read !== undefined) {
    if (read.kind !== "server" || read.clientId !== authenticated.client.clientId) {
      throw new RingfenceError("invalid_request", "a client may revoke only the tokens issued to it");
    }
    await deps.clients.revoke(read.clientId, read.jti, read.exp);
  }
  return { contentType: "text/plain; charset=utf-8", data: Buffer.alloc(0), extensions: [] };
}

/**
 * The form (`token`, an optional `token_type_hint`, which only hints and is not checked) and the
 * calling client, authenticated as the token endpoint does.
 */
async function authenticatedRequest(
  deps: TokenLifecycleDeps,
  body: { contentType: string; data: Buffer },
  ctx: CallContext,
): Promise<{ token: string; authenticated: AuthenticatedClient; vouch: () => Awaitable<void> }> {
  // Answers about tokens are never cached; errors too.
  noStore(ctx);
  const mediaType = body.contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  if (mediaType !== FORM) throw new RingfenceError("invalid_request", `Content-Type must be ${FORM}`);
  const form = readForm(body.data);
  const credentials = readCredentials(ctx, form);
  const token = form.get("token");
  if (token === undefined || token === "") throw new RingfenceError("invalid_request", "token is required");
  const authenticated = await authenticateClient(deps, credentials, ctx);
  return { token, authenticated, vouch: () => stillVouched(deps, authenticated, credentials, ctx) };
}

const INACTIVE: IntrospectTokenResponse = { active: false };

async function standing(
  deps: TokenLifecycleDeps,
  token: string,
  { client }: AuthenticatedClient,
): Promise<IntrospectTokenResponse> {
  const read = await readToken(deps, token);
  if (read === undefined || read.appId !== client.appId) return INACTIVE;
  const common = {
    active: true,
    sub: read.sub,
    exp: read.exp,
    iat: read.iat,
    iss: deps.issuer,
    aud: read.appId,
    jti: read.jti,
    appId: read.appId,
  };
  if (read.kind === "server") {
    const { clientExists, revoked } = await deps.clients.tokenStanding(read.clientId, read.jti);
    if (!clientExists || revoked) return INACTIVE;
    return {
      ...common,
      scope: read.scope,
      clientId: read.clientId,
      tokenType: read.jkt === undefined ? "Bearer" : "DPoP",
      ...(read.jkt === undefined ? {} : { cnf: { jkt: read.jkt } }),
    };
  }
  const scopes = await deps.sessions.tokenScopes(read.sub, read.sessionId, read.jti);
  if (scopes === undefined) return INACTIVE;
  return {
    ...common,
    scope: scopes.join(" "),
    tokenType: "Bearer",
    sessionId: read.sessionId,
    // RFC 9470: the level and time of the session's authentication when the token was issued.
    ...(read.acr === undefined ? {} : { acr: read.acr }),
    ...(read.authTime === undefined ? {} : { authTime: read.authTime }),
  };
}

/**
 * The token when this service signed it (the cached key set, ES256, this issuer), it has not
 * expired, and its claims are those of a server token (`typ: at+jwt`, with `client_id`) or of a
 * session access token (`typ: session+jwt`, with `session_id` and no `client_id`), `aud` its
 * app; undefined for anything else. An unreachable Redis while reading the keys is an outage.
 */
async function readToken(deps: TokenLifecycleDeps, token: string): Promise<Token | undefined> {
  if (token.length > MAX_TOKEN_CHARS) return undefined;
  let payload: Record<string, unknown>;
  let typ: unknown;
  try {
    ({
      payload,
      protectedHeader: { typ },
    } = await jwtVerify(token, deps.keySet.getKey, {
      issuer: deps.issuer,
      algorithms: ["ES256"],
      requiredClaims: ["exp", "iat", "aud", "jti", "sub"],
    }));
  } catch (err) {
    if (isRedisUnavailable(err)) throw err;
    return undefined;
  }
  const { sub, app_id: appId, aud, scope, iat, exp, jti } = payload;
  if (
    typeof sub !== "string" ||
    typeof appId !== "string" ||
    aud !== appId ||
    typeof iat !== "number" ||
    typeof exp !== "number" ||
    typeof jti !== "string"
  ) {
    return undefined;
  }
  const claims: Claims = { sub, appId, scope: typeof scope === "string" ? scope : "", iat, exp, jti };
  if (typ === SERVER_TOKEN_TYPE) {
    const clientId = payload.client_id;
    if (typeof clientId !== "string" || clientId !== sub) return undefined;
    const jkt = (payload.cnf as { jkt?: unknown } | undefined)?.jkt;
    return { ...claims, kind: "server", clientId, ...(typeof jkt === "string" ? { jkt } : {}) };
  }
  if (typ === SESSION_TOKEN_TYPE) {
    const sessionId = payload.session_id;
    if ("client_id" in payload || typeof sessionId !== "string") return undefined;
    const { acr, auth_time: authTime } = payload;
    return {
      ...claims,
      kind: "session",
      sessionId,
      ...(typeof acr === "string" ? { acr } : {}),
      ...(typeof authTime === "number" ? { authTime } : {}),
    };
  }
  return undefined;
}
