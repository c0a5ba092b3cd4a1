import type { AppsModule } from "../apps/module.js";
import type { Module, SharedParts } from "../lifecycle/module.js";
import type { MessagingModule } from "../messaging/module.js";
import type { DeliveryModule } from "../delivery/module.js";
import type { OAuthModule } from "../oauth/module.js";
import { bindService, handlersOf, type CallerAuthenticator } from "../rpc/binding.js";
import { CodeSender } from "./delivery.js";
import { KnownSources } from "./known-sources.js";
import { loginOpener, type OpenLogin } from "./open-login.js";
import { PasswordChecker, PasswordFailures } from "./password-login.js";
import { sessionHandlers, type StepUpTokens } from "./service.js";
import { SESSION } from "./surface.js";
import type { SessionStore } from "./sessions.js";
import { sessionAuthenticator, type Caller } from "./tokens.js";
import type { UserStore } from "./users.js";

type SenderDeps = ConstructorParameters<typeof CodeSender>[0];
type HandlerDeps = Parameters<typeof sessionHandlers>[0];

/** What the session module takes of the process (src/registry.ts gives it). */
export interface SessionNeeds extends Pick<SharedParts, "log" | "redis" | "keys" | "secrets" | "metrics"> {
  config: SenderDeps["config"] & HandlerDeps["config"];
  lookupData: SenderDeps["lookupData"];
  apps: SenderDeps["apps"];
  fraud: SenderDeps["fraud"];
  users: UserStore;
  sessions: SessionStore;
  challenges: HandlerDeps["challenges"];
  signingKeys: HandlerDeps["signingKeys"];
}

export interface SessionModule extends Module {
  /** The authentication chain of user calls: a session access token whose session is alive. */
  authenticate: CallerAuthenticator<Caller>;
  /** Sends login and step-up codes under the session abuse limits. */
  codes: CodeSender;
  /**
   * What a login by other means (a passkey) shares with the password login: its failure windows,
   * the known sources that spare a user's own network, and the opening of its session.
   */
  logins: { failures: PasswordFailures; knownSources: KnownSources; open: OpenLogin };
}

/** Users and their sessions: code and password logins, refreshes (a step-up token's among them), logout. */
export function sessionModule(
  r: SessionNeeds,
  d: {
    messaging: MessagingModule;
    delivery: DeliveryModule;
    apps: AppsModule;
    oauth: OAuthModule;
    stepUpTokens: StepUpTokens;
  },
): SessionModule {
  const codes = new CodeSender({
    config: r.config,
    log: r.log,
    redis: r.redis,
    keys: r.keys,
    sms: d.delivery.sms,
    email: d.messaging.email,
    lookupData: r.lookupData,
    apps: r.apps,
    fraud: r.fraud,
    users: r.users,
  });
  const passwordFailures = new PasswordFailures(r.redis, r.keys, {
    perIdentifier: r.config.PASSWORD_FAILURES_IDENTIFIER,
    perAddress: r.config.PASSWORD_FAILURES_IP,
  });
  const knownSources = new KnownSources(r.redis, r.keys, r.secrets);
  const openLogin = loginOpener({
    config: r.config,
    issuer: d.oauth.issuer,
    sessions: r.sessions,
    signingKeys: r.signingKeys,
    events: d.apps.events,
  });
  const handlers = sessionHandlers({
    config: r.config,
    issuer: d.oauth.issuer,
    log: r.log,
    redis: r.redis,
    secrets: r.secrets,
    apps: r.apps,
    users: r.users,
    sessions: r.sessions,
    challenges: r.challenges,
    stepUpTokens: d.stepUpTokens,
    signingKeys: r.signingKeys,
    keySet: d.oauth.keySet,
    codes,
    events: d.apps.events,
    passwordFailures,
    passwords: new PasswordChecker(r.users),
    knownSources,
    openLogin,
    metrics: r.metrics,
  });
  const authenticate = sessionAuthenticator({
    keySet: d.oauth.keySet,
    sessions: r.sessions,
    issuer: d.oauth.issuer,
  });
  return {
    name: "session",
    authenticate,
    codes,
    logins: { failures: passwordFailures, knownSources, open: openLogin },
    bindings: [
      bindService(SESSION.definition, handlersOf(SESSION.definition, handlers, d.apps.handlers.session), {
        ...SESSION.surface,
        authenticators: { session: authenticate, app: d.apps.authenticate },
      }),
    ],
  };
}
