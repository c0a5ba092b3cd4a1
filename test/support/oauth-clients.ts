import { expect } from "chai";
import * as oauth from "oauth4webapi";
import { issueSessionToken } from "../../src/session/tokens.js";
import { newJti, type Grant } from "../../src/session/sessions.js";
import { cliEnv, runCli, type TestApp } from "./app.js";
import { basicAuth, rest, type RestAnswer } from "./rest.js";

/** An app and its management key. */
export interface AppCreds {
  appId: string;
  key: string;
}

/** A client and its secret. */
export interface ClientCreds {
  clientId: string;
  secret: string;
}

/** Creates an app with the CLI, as an operator would. */
export async function newApp(app: TestApp, name = "Backend"): Promise<AppCreds> {
  const made = JSON.parse((await runCli(["apps", "create", "--name", name], cliEnv(app.config))).stdout) as {
    app_id: string;
    management_api_key: string;
  };
  return { appId: made.app_id, key: made.management_api_key };
}

/** Registers a client credentials client of `owner` over REST, authenticating by `authMethod`. */
export async function newClient(
  app: TestApp,
  owner: AppCreds,
  scopes: string[] = ["billing:read"],
  authMethod: "client_secret_basic" | "client_secret_post" = "client_secret_basic",
): Promise<ClientCreds> {
  const r = await rest(app.baseUrl).call("POST", `/v2/session/apps/${owner.appId}/oauth/clients`, {
    body: {
      client_name: "Backend",
      provider_url: "https://backend.example.com",
      scopes,
      grant_types: ["client_credentials"],
      token_endpoint_auth_method: authMethod,
    },
    bearer: owner.key,
  });
  expect(r.status, JSON.stringify(r.body)).to.equal(201);
  return { clientId: String(r.body.client_id), secret: String(r.body.client_secret) };
}

/** The issuer's RFC 8414 metadata, through oauth4webapi's discovery. */
export async function discover(app: TestApp): Promise<oauth.AuthorizationServer> {
  const url = new URL(app.config.ISSUER_URL);
  const res = await oauth.discoveryRequest(url, { algorithm: "oauth2", [oauth.allowInsecureRequests]: true });
  return oauth.processDiscoveryResponse(url, res);
}

/** A server token of `c`, through oauth4webapi's client credentials grant. */
export async function serverToken(app: TestApp, c: ClientCreds, scope = "billing:read"): Promise<string> {
  const as = await discover(app);
  const res = await oauth.clientCredentialsGrantRequest(
    as,
    { client_id: c.clientId },
    oauth.ClientSecretBasic(c.secret),
    new URLSearchParams({ scope }),
    { [oauth.allowInsecureRequests]: true },
  );
  return (await oauth.processClientCredentialsResponse(as, { client_id: c.clientId }, res)).access_token;
}

/** POST /v1/session/oauth/<endpoint> with `form`, the client in HTTP Basic unless it is null. */
export function tokenCall(
  app: TestApp,
  endpoint: "introspect" | "revoke" | "token",
  form: Record<string, string>,
  c: ClientCreds | null,
): Promise<RestAnswer> {
  return rest(app.baseUrl).call("POST", `/v1/session/oauth/${endpoint}`, {
    form,
    headers: c === null ? {} : basicAuth(c.clientId, c.secret),
  });
}

/**
 * A live session of a user of `appId` and its access token, opened as a login opens one, with the
 * scope of `grant` when one is given (a single-use one attached to this token).
 */
export async function sessionToken(
  app: TestApp,
  appId: string,
  grant?: Grant,
): Promise<{ token: string; userId: string; sessionId: string }> {
  const r = app.registry;
  const userId = `usr_${Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64url")}`;
  const jti = newJti();
  const opened = await r.sessions.open(userId, appId, jti, {
    amr: ["otp"],
    ...(grant === undefined ? {} : { grant }),
  });
  const token = await issueSessionToken(r.signingKeys, {
    issuer: app.config.ISSUER_URL,
    userId,
    sessionId: opened.sessionId,
    appId,
    scopes: grant === undefined ? [] : [grant.scope],
    jti,
    lifetimeSeconds: app.config.SESSION_TOKEN_TTL_SECONDS,
    login: opened.login,
  });
  return { token, userId, sessionId: opened.sessionId };
}
