import { andThen, type Awaitable } from "../awaitable.js";
import { RingfenceError } from "../errors.js";
import type { CallContext } from "../rpc/binding.js";
import { assertedClientId, type ClientAssertions } from "./client-assertion.js";
import type { AuthenticatedClient, ClientStore, OAuthClient } from "./clients.js";
import type { TokenFailures } from "./failures.js";
import { JWT_BEARER_ASSERTION, type TokenEndpointAuthMethod } from "./metadata.js";

export { CLIENT_ASSERTION_ALGORITHMS, DPOP_ALGORITHMS, TOKEN_ENDPOINT_AUTH_METHODS } from "./metadata.js";

/** Where client authentication looks, and where its failures are counted. */
export interface ClientAuthDeps {
  clients: ClientStore;
  /** Failed client authentications per client_id and per client address (429 past them). */
  failures: TokenFailures;
  /** `private_key_jwt`: client assertions (RFC 7523). */
  assertions: ClientAssertions;
}

/** The client's credentials as the request gave them (RFC 6749 section 2.3.1, RFC 7523). */
export interface ClientCredentials {
  /** The form's client_id, Basic's user, or the client an assertion claims to be. */
  clientId: string | undefined;
  secret: string | undefined;
  /** Whether they came in HTTP Basic: a failure then answers with a Basic challenge. */
  basic: boolean;
  /** The method the request used; undefined when it gave no credentials. */
  method: TokenEndpointAuthMethod | undefined;
  /** The client assertion of a `private_key_jwt` request. */
  assertion?: string | undefined;
}

const CHALLENGE = { "www-authenticate": 'Basic realm="ringfence"' };

/**
 * The credentials of a token request: HTTP Basic, client_id/client_secret in the form, or a
 * client assertion in the form, never two of them (RFC 6749 section 2.3). A malformed Basic
 * header is invalid_client at once.
 */
export function readCredentials(ctx: CallContext, form: Map<string, string>): ClientCredentials {
  const basic = readBasic(ctx.header("authorization"));
  if (form.has("client_assertion") || form.has("client_assertion_type")) {
    return readAssertion(form, basic !== undefined);
  }
  if (basic !== undefined && (form.has("client_id") || form.has("client_secret"))) {
    throw new RingfenceError(
      "invalid_request",
      "use HTTP Basic or client_id/client_secret in the body, not both",
    );
  }
  if (basic !== undefined) return { ...basic, basic: true, method: "client_secret_basic" };
  const secret = form.get("client_secret");
  return {
    clientId: form.get("client_id"),
    secret,
    basic: false,
    method: secret === undefined ? undefined : "client_secret_post",
  };
}

/** RFC 7523 section 2.2: client_assertion_type and client_assertion, and no other credentials. */
function readAssertion(form: Map<string, string>, basic: boolean): ClientCredentials {
  if (basic || form.has("client_secret")) {
    throw new RingfenceError(
      "invalid_request",
      "use one client authentication method, not a secret and an assertion",
    );
  }
  const type = form.get("client_assertion_type");
  const assertion = form.get("client_assertion");
  if (type === undefined || assertion === undefined) {
    throw new RingfenceError("invalid_request", "client_assertion_type and client_assertion go together");
  }
  if (type !== JWT_BEARER_ASSERTION) {
    throw new RingfenceError("invalid_client", `client_assertion_type must be ${JWT_BEARER_ASSERTION}`);
  }
  return {
    clientId: form.get("client_id") ?? assertedClientId(assertion),
    secret: undefined,
    basic: false,
    method: "private_key_jwt",
    assertion,
  };
}

/**
 * Authenticates the client: its stored secret hash against the one given, or its assertion
 * against its registered keys, by the method it registered (either secret method when it named
 * none). A failure (no credentials, an unknown client, a wrong secret, another method than the
 * registered one, a bad or replayed assertion) is counted in the failure windows and answered 401
 * invalid_client, or 429 once a window is full; a success is counted nowhere.
 */
export function authenticateClient(
  deps: ClientAuthDeps,
  credentials: ClientCredentials,
  ctx: CallContext,
): Awaitable<AuthenticatedClient> {
  return andThen(
    reauthenticate(deps, credentials, true),
    (authenticated) =>
      authenticated ??
      clientAuthFailed(deps, credentials, ctx).then((refusal) => {
        throw refusal;
      }),
  );
}

/**
 * The client of credentials that authenticated before, read again (see ClientStore): undefined
 * once it is gone. `first` checks an assertion, which is single-use; later readings only look
 * the client up again.
 */
export function reauthenticate(
  deps: ClientAuthDeps,
  credentials: ClientCredentials,
  first = false,
): Awaitable<AuthenticatedClient | undefined> {
  const { clientId, secret, assertion, method } = credentials;
  if (clientId === undefined || method === undefined) return undefined;
  let found: Awaitable<AuthenticatedClient | undefined> = undefined;
  if (assertion !== undefined) {
    found = first ? deps.assertions.verify(deps.clients, clientId, assertion) : deps.clients.find(clientId);
  } else if (secret !== undefined) {
    found = deps.clients.authenticate(clientId, secret);
  }
  return andThen(found, (authenticated) =>
    authenticated !== undefined && usesItsMethod(authenticated.client, method) ? authenticated : undefined,
  );
}

/**
 * A client that named its method at registration authenticates only by it; one that named none
 * takes either secret method, HTTP Basic or the form
 * (docs/session-api.md#client-authentication-methods).
 */
function usesItsMethod(client: OAuthClient, method: TokenEndpointAuthMethod): boolean {
  if (client.authMethod === undefined) return method !== "private_key_jwt";
  return client.authMethod === method;
}

/** Counts a failed authentication; the error to answer it with. */
export async function clientAuthFailed(
  deps: ClientAuthDeps,
  credentials: ClientCredentials,
  ctx: CallContext,
): Promise<RingfenceError> {
  const refusal = await deps.failures.failed(credentials.clientId, ctx.clientAddress);
  return (
    refusal ??
    new RingfenceError(
      "invalid_client",
      "client authentication failed",
      credentials.basic ? { ...CHALLENGE } : {},
    )
  );
}

/** RFC 6749 section 2.3.1: Basic with the form-urlencoded client_id and secret. */
function readBasic(header: string | undefined): { clientId: string; secret: string } | undefined {
  if (header === undefined) return undefined;
  const match = /^Basic\s+([A-Za-z0-9+/=._~-]+)\s*$/i.exec(header);
  if (match?.[1] === undefined) {
    throw new RingfenceError("invalid_client", "the Authorization header is not HTTP Basic", {
      ...CHALLENGE,
    });
  }
  const decoded = Buffer.from(match[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0)
    throw new RingfenceError("invalid_client", "malformed HTTP Basic credentials", { ...CHALLENGE });
  try {
    const decode = (s: string) => decodeURIComponent(s.replace(/\+/g, " "));
    return { clientId: decode(decoded.slice(0, colon)), secret: decode(decoded.slice(colon + 1)) };
  } catch {
    throw new RingfenceError("invalid_client", "malformed HTTP Basic credentials", { ...CHALLENGE });
  }
}
