import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { badField, badInput, RingfenceError } from "../errors.js";
import type { HttpBody } from "../gen/google/api/httpbody.js";
import type {
  ReceiveWebhookRequest,
  VerifyWebhookRequest,
  WhatsAppWebhookServiceService,
} from "../gen/ringfence/delivery/v1/whatsapp_webhook_service.js";
import type { DeliveryReceipt, DeliveryState } from "../messaging/provider.js";
import type { ProviderSpec } from "../messaging/providers.js";
import type { Metrics } from "../observability/metrics.js";
import type { AuthFailures } from "../otp/failures.js";
import {
  callerOf,
  keyed,
  type AuthenticatorsByKind,
  type CallContext,
  type HandlerSet,
} from "../rpc/binding.js";
import { callerKey } from "../rpc/callers.js";
import { sameToken } from "./reports.js";

/** A WhatsApp entry, its account given. */
type WhatsAppSpec = ProviderSpec & { whatsapp: NonNullable<ProviderSpec["whatsapp"]> };

/** A notification whose signature was checked, with the entries it names by phone number id. */
export interface SignedNotification {
  /** The entries its changes name (each signed it), by `phone_number_id`; empty: none is ours. */
  readonly entries: ReadonlyMap<string, WhatsAppSpec>;
  readonly notification: Notification;
}

/** Meta at the handshake: the entry whose `verify_token` it gave. */
export const WHATSAPP_HANDSHAKE = callerKey<WhatsAppSpec>(
  "whatsapp-verify-token",
  (p) => `whatsapp:${p.name}`,
);
/** Meta with a notification: the entries whose `app_secret` signed it. */
export const WHATSAPP_SIGNER = callerKey<SignedNotification>("whatsapp-signature", (s) =>
  s.entries.size === 0
    ? "whatsapp"
    : `whatsapp:${[...new Set([...s.entries.values()].map((p) => p.name))].join(",")}`,
);

/** Each status Meta gives, as the state of its receipt (docs/routing.md#whatsapp). */
const STATES = {
  sent: "accepted",
  delivered: "delivered",
  read: "delivered",
  failed: "failed",
} as const satisfies Record<string, DeliveryState>;
type Status = keyof typeof STATES;

const isStatus = (s: string): s is Status => Object.hasOwn(STATES, s);

/** A string, or the refusal's words for what came instead. */
const text = (max: number) =>
  z
    .string({ error: (issue) => (issue.input === undefined ? "is required" : "must be a string") })
    .max(max, `must be at most ${max} characters`);
const list = <T extends z.ZodType>(item: T) =>
  z.array(item, { error: (issue) => (issue.input === undefined ? "is required" : "must be an array") });
const object = <T extends z.ZodRawShape>(shape: T) =>
  z.object(shape, { error: (issue) => (issue.input === undefined ? "is required" : "must be an object") });

/** The part of Meta's notification that is read; anything else in it is ignored. */
const NotificationSchema = object({
  object: text(64),
  entry: list(
    object({
      changes: list(
        object({
          field: text(64),
          value: object({
            metadata: object({ phone_number_id: text(64) }).optional(),
            statuses: list(
              object({
                id: text(256).min(1, "is required"),
                status: text(32),
                errors: list(
                  object({
                    code: z.number({ error: "must be a number" }).int("must be a whole number").optional(),
                  }),
                ).optional(),
              }),
            ).optional(),
          }),
        }).superRefine((change, ctx) => {
          // A `messages` change always names the number it is about: the entry is found by it.
          if (change.field === "messages" && change.value.metadata === undefined) {
            ctx.addIssue({ code: "custom", path: ["value", "metadata"], message: "is required" });
          }
        }),
      ),
    }),
  ),
});
type Notification = z.infer<typeof NotificationSchema>;

const SIGNATURE = /^sha256=([0-9a-f]{64})$/i;

/** The longest challenge repeated, well over Meta's. */
const CHALLENGE_MAX = 512;

/**
 * The webhook of the WhatsApp providers (docs/routing.md#whatsapp): Meta's subscription handshake,
 * and the statuses of their messages, each given to the delivery-report listeners as the receipt
 * of the message whose id the send answered. A notification is read only once its signature is
 * found right for every entry its changes name.
 */
export class WhatsAppWebhook {
  private readonly entries: readonly WhatsAppSpec[];
  private readonly byNumber: ReadonlyMap<string, WhatsAppSpec>;

  constructor(
    specs: readonly ProviderSpec[],
    private readonly o: {
      /** Where each receipt goes (the delivery-report listeners); resolves once they have it. */
      report: (provider: string, receipt: DeliveryReceipt) => Promise<void>;
      metrics?: Pick<Metrics, "whatsappStatus"> | undefined;
      now?: () => number;
    },
  ) {
    this.entries = specs.filter((s): s is WhatsAppSpec => s.whatsapp !== undefined);
    this.byNumber = new Map(this.entries.map((s) => [s.whatsapp.phoneNumberId, s]));
  }

  /** Who calls each method; wrong verify tokens and signatures are counted per address by `failures`. */
  authenticators(failures: Pick<AuthFailures, "guard">): AuthenticatorsByKind {
    return {
      [WHATSAPP_HANDSHAKE.kind]: keyed(
        WHATSAPP_HANDSHAKE,
        failures.guard((_ctx, request) => this.handshake(request as VerifyWebhookRequest)),
      ),
      [WHATSAPP_SIGNER.kind]: keyed(
        WHATSAPP_SIGNER,
        failures.guard((ctx, request) => this.signed(ctx, request as ReceiveWebhookRequest)),
      ),
    };
  }

  handlers(): HandlerSet<typeof WhatsAppWebhookServiceService, "verifyWebhook" | "receiveWebhook"> {
    return {
      verifyWebhook: (req, ctx): HttpBody => {
        callerOf(ctx, WHATSAPP_HANDSHAKE);
        // The challenge is the caller's own text: never sniffed as anything but text.
        ctx.setHeader("x-content-type-options", "nosniff");
        return {
          contentType: "text/plain; charset=utf-8",
          data: Buffer.from(req.hub?.challenge ?? "", "utf8"),
          extensions: [],
        };
      },
      receiveWebhook: async (_req, ctx) => {
        const { entries, notification } = callerOf(ctx, WHATSAPP_SIGNER);
        for (const entry of notification.entry) {
          for (const change of entry.changes) {
            const spec = entries.get(change.value.metadata?.phone_number_id ?? "");
            if (change.field !== "messages" || spec === undefined) continue;
            // In order: a message's `sent` is recorded before its `delivered`.
            for (const status of change.value.statuses ?? []) await this.record(spec, status);
          }
        }
        return {};
      },
    };
  }

  private async record(
    spec: WhatsAppSpec,
    status: { id: string; status: string; errors?: { code?: number | undefined }[] | undefined },
  ): Promise<void> {
    // Statuses of other kinds (a deleted message, a catalog warning) say nothing of delivery.
    if (!isStatus(status.status)) return;
    const code = status.status === "failed" ? status.errors?.[0]?.code : undefined;
    const receipt: DeliveryReceipt = {
      providerId: status.id,
      state: STATES[status.status],
      providerStatus: status.status.toUpperCase(),
      ...(code === undefined ? {} : { errorCode: String(code) }),
      at: new Date((this.o.now ?? Date.now)()).toISOString(),
    };
    await this.o.report(spec.name, receipt);
    this.o.metrics?.whatsappStatus(spec.name, status.status);
  }

  /** The entry whose `verify_token` the handshake gives; every entry is compared, in constant time. */
  private handshake(request: VerifyWebhookRequest): WhatsAppSpec {
    const hub = request.hub;
    for (const [name, value] of [
      ["hub.mode", hub?.mode],
      ["hub.verify_token", hub?.verifyToken],
      ["hub.challenge", hub?.challenge],
    ] as const) {
      if (value === undefined || value === "") throw badField(name, "is required");
    }
    if (hub?.mode !== "subscribe") throw badField("hub.mode", "must be subscribe");
    if (hub.challenge.length > CHALLENGE_MAX) {
      throw badField("hub.challenge", `must be at most ${CHALLENGE_MAX} characters`);
    }
    let found: WhatsAppSpec | undefined;
    for (const spec of this.entries) {
      if (sameToken(hub.verifyToken, spec.whatsapp.verifyToken)) found ??= spec;
    }
    if (found === undefined) {
      throw new RingfenceError(
        "forbidden",
        "hub.verify_token is not the verify_token of a WhatsApp provider",
      );
    }
    return found;
  }

  /**
   * The notification, once its signature is the HMAC of its raw bytes with the `app_secret` of
   * each entry it names. A signature missing or malformed is refused first; a body naming no
   * entry of ours cannot be checked, and is read for nothing.
   */
  private signed(ctx: CallContext, request: ReceiveWebhookRequest): SignedNotification {
    const given = SIGNATURE.exec(ctx.header("x-hub-signature-256")?.trim() ?? "")?.[1];
    if (given === undefined) {
      throw new RingfenceError(
        "unauthorized",
        "X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body with the app secret> is required",
      );
    }
    const raw = Buffer.from(request.httpBody?.data ?? []);
    const notification = readNotification(raw);
    const entries = new Map<string, WhatsAppSpec>();
    for (const entry of notification.entry) {
      for (const change of entry.changes) {
        const number = change.value.metadata?.phone_number_id;
        const spec =
          change.field === "messages" && number !== undefined ? this.byNumber.get(number) : undefined;
        if (number !== undefined && spec !== undefined) entries.set(number, spec);
      }
    }
    const signature = Buffer.from(given, "hex");
    for (const spec of new Set(entries.values())) {
      const expected = createHmac("sha256", spec.whatsapp.appSecret).update(raw).digest();
      if (!timingSafeEqual(expected, signature)) {
        throw new RingfenceError(
          "unauthorized",
          "X-Hub-Signature-256 is not the HMAC-SHA256 of the body with the app secret of its phone number",
        );
      }
    }
    return { entries, notification };
  }
}

/** The notification in `raw`, or the 400 naming what is wrong with it. */
function readNotification(raw: Buffer): Notification {
  let json: unknown;
  try {
    json = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new RingfenceError("bad_request", "the body is not JSON");
  }
  const parsed = NotificationSchema.safeParse(json);
  if (!parsed.success) {
    // The body as a whole is not an object: say so rather than name an empty field.
    if (parsed.error.issues[0]?.path.length === 0)
      throw new RingfenceError("bad_request", "the body must be a JSON object");
    throw badInput(parsed.error);
  }
  return parsed.data;
}
