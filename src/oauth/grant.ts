import { randomUUID } from "node:crypto";
import { andThen, type Awaitable } from "../awaitable.js";
import { quote, RingfenceError } from "../errors.js";
import { noStore, type CallContext } from "../rpc/binding.js";
import { signAccessToken, type SigningKeys } from "./keys/signing-keys.js";
import {
  authenticateClient,
  clientAuthFailed,
  readCredentials,
  reauthenticate,
  type ClientAuthDeps,
  type ClientCredentials,
} from "./client-auth.js";
import type { AuthenticatedClient } from "./clients.js";
import type { CheckedProof, DpopProofs } from "./dpop.js";

export interface TokenDeps extends ClientAuthDeps {
  keys: SigningKeys;
  /** DPoP proofs (RFC 9449): a request with one gets a token bound to its key. */
  dpop: DpopProofs;
  issuer: string;
  lifetimeSeconds: number;
  now?: () => number;
}

export interface TokenAnswer {
  accessToken: string;
  tokenType: "Bearer" | "DPoP";
  expiresIn: number;
  scope: string;
}

const FORM = "application/x-www-form-urlencoded";
/** Readings of a client tried before the token is given up (each found it, but came too late). */
const MAX_READINGS = 3;

/**
 * POST /v1/session/oauth/token with grant_type=client_credentials (RFC 6749 section 4.4): read
 * the form and the client's credentials (section 2.3.1), check the grant type and the scope's
 * syntax and a DPoP proof when there is one, authenticate the client, check that it may use this
 * grant and these scopes, spend the proof, sign. Without a DPoP proof nothing is added to the
 * path of a client with a secret.
 */
export function clientCredentialsGrant(
  deps: TokenDeps,
  body: { contentType: string; data: Buffer },
  ctx: CallContext,
): Awaitable<TokenAnswer> {
  // Answers holding tokens or credentials are never cached; errors too.
  noStore(ctx);

  const mediaType = body.contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  if (mediaType !== FORM) throw new RingfenceError("invalid_request", `Content-Type must be ${FORM}`);
  const form = readForm(body.data);
  const credentials = readCredentials(ctx, form);
  const grantType = form.get("grant_type");
  if (grantType === undefined) throw new RingfenceError("invalid_request", "grant_type is required");
  if (grantType !== "client_credentials") {
    throw new RingfenceError("unsupported_grant_type", `grant_type ${quote(grantType)} is not supported`);
  }
  const requested = readScope(form.get("scope"));
  const proofHeader = ctx.header("dpop");
  if (proofHeader === undefined) {
    return andThen(authenticateClient(deps, credentials, ctx), (authenticated) =>
      issue(deps, authenticated, credentials, requested, undefined, ctx),
    );
  }
  return deps.dpop.check(proofHeader, "POST").then(async (proof) => {
    const authenticated = await authenticateClient(deps, credentials, ctx);
    return issue(deps, authenticated, credentials, requested, proof, ctx);
  });
}

/**
 * The token of an authenticated client: it may use this grant and these scopes; the proof, if
 * any, is spent; signed, and answered while a reading of the client vouches for it. At once
 * when the key is kept and the reading fresh.
 */
function issue(
  deps: TokenDeps,
  authenticated: AuthenticatedClient,
  credentials: ClientCredentials,
  requested: string[],
  proof: CheckedProof | undefined,
  ctx: CallContext,
): Awaitable<TokenAnswer> {
  const { client } = authenticated;
  if (!client.grantTypes.includes("client_credentials")) {
    throw new RingfenceError("unauthorized_client", "this client may not use the client_credentials grant");
  }
  const unknown = requested.find((s) => !client.scopes.includes(s));
  if (unknown !== undefined) {
    throw new RingfenceError("invalid_scope", `scope ${quote(unknown)} is not registered for this client`);
  }
  const sign = (): Awaitable<TokenAnswer> => {
    const iat = Math.floor((deps.now ?? Date.now)() / 1000);
    const scope = requested.join(" ");
    const signed = signAccessToken(deps.keys, {
      iss: deps.issuer,
      sub: client.clientId,
      // RFC 9068 section 2.2: the client the token was issued to. Session tokens never carry it.
      client_id: client.clientId,
      aud: client.appId,
      app_id: client.appId,
      scope,
      iat,
      exp: iat + deps.lifetimeSeconds,
      jti: randomUUID(),
      // RFC 9449 section 6.1: bound to the proof's key.
      ...(proof === undefined ? {} : { cnf: { jkt: proof.jkt } }),
    });
    return andThen(signed, (accessToken) =>
      andThen(stillVouched(deps, authenticated, credentials, ctx), () => ({
        accessToken,
        tokenType: tokenTypeOf(proof),
        expiresIn: deps.lifetimeSeconds,
        scope,
      })),
    );
  };
  return proof === undefined ? sign() : deps.dpop.spend(proof).then(sign);
}

function tokenTypeOf(proof: CheckedProof | undefined): "Bearer" | "DPoP" {
  return proof === undefined ? "Bearer" : "DPoP";
}

/**
 * Answers only while a reading of the client vouches for it (see ClientStore): when signing
 * took longer, the client is read again, so a client deleted meanwhile gets no token.
 */
export function stillVouched(
  deps: ClientAuthDeps,
  authenticated: AuthenticatedClient,
  credentials: ClientCredentials,
  ctx: CallContext,
): Awaitable<void> {
  return authenticated.fresh() ? undefined : readAgain(deps, authenticated, credentials, ctx);
}

async function readAgain(
  deps: ClientAuthDeps,
  authenticated: AuthenticatedClient,
  credentials: ClientCredentials,
  ctx: CallContext,
): Promise<void> {
  let current: AuthenticatedClient | undefined = authenticated;
  for (let readings = 1; current !== undefined && !current.fresh(); readings += 1) {
    if (readings >= MAX_READINGS) {
      throw new RingfenceError("unavailable", "the client could not be read in time; try again", {
        "retry-after": "1",
      });
    }
    current = await reauthenticate(deps, credentials);
  }
  if (current === undefined) throw await clientAuthFailed(deps, credentials, ctx);
}

/** The form's parameters; RFC 6749 section 3.2: none may be given more than once. */
export function readForm(data: Buffer): Map<string, string> {
  const params = new URLSearchParams(data.toString("utf8"));
  const form = new Map<string, string>();
  for (const [k, v] of params) {
    if (form.has(k)) throw new RingfenceError("invalid_request", `parameter ${k} is given more than once`);
    form.set(k, v);
  }
  return form;
}

/** RFC 6749 section 3.3: scope-tokens separated by single spaces; omitted grants none. */
function readScope(scope: string | undefined): string[] {
  if (scope === undefined || scope === "") return [];
  if (!/^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/.test(scope)) {
    throw new RingfenceError("invalid_scope", "scope must be scope tokens separated by single spaces");
  }
  return [...new Set(scope.split(" "))];
}
