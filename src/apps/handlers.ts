import { badField } from "../errors.js";
import type { AddAppScopeRequest, AddAppScopeResponse } from "../gen/ringfence/oauth/v1/oauth_service.js";
import type { OAuthServiceService } from "../gen/ringfence/oauth/v1/oauth_service.js";
import type { SessionServiceService } from "../gen/ringfence/session/v1/session_service.js";
import type { OutboundGuard } from "../net/outbound.js";
import type { HandlerSet, UnaryHandler } from "../rpc/binding.js";
import { SCOPE } from "./app.js";
import { appOf, type AppStore } from "./store.js";
import { createAppWebhookHandler, type AppWebhooks } from "./webhooks.js";

/**
 * `POST /v1/session/apps/{app_id}/scopes` (an rpc of the OAuth service's contract, an operation on
 * the app): adds a scope the app's clients and step-up configuration may use.
 */
export function addAppScopeHandler(apps: AppStore): UnaryHandler<AddAppScopeRequest, AddAppScopeResponse> {
  return async (req, ctx) => {
    const app = appOf(ctx);
    const scope = SCOPE.safeParse(req.scope);
    if (!scope.success) {
      throw badField("scope", scope.error.issues[0]?.message ?? "is invalid");
    }
    return { appId: app.appId, scopes: await apps.addScope(app.appId, scope.data) };
  };
}

/**
 * The app operations the released contracts keep among other services' rpcs, brought to those
 * services' bindings by the apps module (src/apps/module.ts).
 */
export function appHandlerSets(deps: {
  apps: AppStore;
  webhooks: AppWebhooks;
  outbound: Pick<OutboundGuard, "checkUrl">;
}): {
  session: HandlerSet<typeof SessionServiceService, "createAppWebhook">;
  oauth: HandlerSet<typeof OAuthServiceService, "addAppScope">;
} {
  return {
    session: { createAppWebhook: createAppWebhookHandler(deps.webhooks, deps.outbound) },
    oauth: { addAppScope: addAppScopeHandler(deps.apps) },
  };
}
