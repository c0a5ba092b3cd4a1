/**
 * The channels a V2 code goes through (docs/v2-api.md#channels): each planned channel's message,
 * providers and price, in the order the verification falls back through them.
 */
import type { Channel } from "../messaging/providers.js";
import { renderOtpSms, type RenderedSms } from "../messaging/templates.js";
import type { StoredAuthentication } from "./store.js";
import type { OutgoingSms } from "../messaging/provider.js";
import { renderOtpVoice } from "../messaging/voice-text.js";
import type { Plan, Router, Target } from "../delivery/router.js";
import type { VerifySettings } from "./settings.js";

/** One channel of a verification: its message for the code, the providers it tries, its price. */
export interface Stage {
  channel: Channel;
  sms: OutgoingSms;
  plan: Plan;
  /** What the account pays for one message of it, in millionths. */
  price: number;
}

/**
 * The SMS text of a code sent after its verification's first message (a retry, a fallback), as
 * that verification asked for it: its locale, template and app realm, the life the code has left.
 */
export function renderAgain(
  auth: Pick<StoredAuthentication, "locale" | "templateId" | "appRealm" | "expiresAtMs">,
  customTemplates: Record<string, Record<string, string>>,
  code: string,
  now: number,
): RenderedSms {
  return renderOtpSms({
    code,
    locale: auth.locale,
    templateId: auth.templateId === "" ? undefined : auth.templateId,
    customTemplates,
    lifetimeMinutes: Math.max(1, Math.ceil((auth.expiresAtMs - now) / 60_000)),
    appRealm: auth.appRealm === "" ? undefined : auth.appRealm,
  });
}

/** The price of one message on `channel` to `country` (SMS_PRICES, WHATSAPP_PRICES, VOICE_PRICES). */
export function channelPrice(
  config: Pick<VerifySettings, "SMS_PRICES" | "WHATSAPP_PRICES" | "VOICE_PRICES">,
  channel: Channel,
  country: string,
): number {
  const prices =
    channel === "whatsapp"
      ? config.WHATSAPP_PRICES
      : channel === "voice"
        ? config.VOICE_PRICES
        : config.SMS_PRICES;
  return prices[country] ?? prices.default ?? 0;
}

/**
 * The message of `channel` for `code`, from the SMS as rendered: SMS sends its text; voice speaks
 * the code digit by digit in its language; WhatsApp fills its approved template with the code
 * (the provider takes `code`; the text is kept for nothing but its locale).
 */
export function messageFor(channel: Channel, sms: OutgoingSms, code: string): OutgoingSms {
  if (channel === "sms") return sms;
  if (channel === "voice") return { ...sms, ...renderOtpVoice(code, sms.locale), code };
  return { ...sms, code };
}

/** Each planned channel's stage for one message (`sms` is that message as SMS renders it). */
export function stagesFor(
  deps: {
    router: Pick<Router, "plan">;
    config: Pick<VerifySettings, "SMS_PRICES" | "WHATSAPP_PRICES" | "VOICE_PRICES">;
  },
  channels: readonly [Channel, ...Channel[]],
  target: Target,
  sms: OutgoingSms,
  code: string,
  avoid?: string,
): [Stage, ...Stage[]] {
  const stage = (channel: Channel, i: number): Stage => ({
    channel,
    sms: messageFor(channel, sms, code),
    // A retry avoids the provider of the attempt before it on its own channel only.
    plan: deps.router.plan(channel, target, i === 0 ? avoid : undefined),
    price: channelPrice(deps.config, channel, target.country),
  });
  const [first, ...rest] = channels;
  return [stage(first, 0), ...rest.map((c, i) => stage(c, i + 1))];
}

/** How a row keeps its planned channels: none for SMS alone (as before channels), else a comma list. */
export function plannedField(channels: readonly Channel[]): string {
  return channels.length === 1 && channels[0] === "sms" ? "" : channels.join(",");
}

/** The planned channels a row keeps (none: SMS alone). */
export function plannedChannels(field: string | undefined): Channel[] {
  return field === undefined || field === "" ? ["sms"] : (field.split(",") as Channel[]);
}
