import { DeliveryReportServiceService } from "../gen/ringfence/delivery/v1/delivery_report_service.js";
import { WhatsAppWebhookServiceService } from "../gen/ringfence/delivery/v1/whatsapp_webhook_service.js";
import { declareService, type JsonSchema } from "../rpc/surface.js";

/**
 * What delivery declares of its REST surface beyond the proto (src/rpc/surface.ts): a report is
 * answered 204, and its caller is the provider its path names, by that provider's status token.
 */
export const DELIVERY_REPORTS = declareService(DeliveryReportServiceService, {
  dialect: "session",
  successStatuses: { reportDeliveryStatus: 204 },
  callers: { reportDeliveryStatus: "provider" },
});

/** The part of Meta's notification the webhook reads (docs/routing.md#whatsapp). */
const NOTIFICATION: JsonSchema = {
  type: "object",
  required: ["object", "entry"],
  properties: {
    object: { type: "string", description: "`whatsapp_business_account`" },
    entry: {
      type: "array",
      items: {
        type: "object",
        required: ["changes"],
        properties: {
          id: { type: "string", description: "The WhatsApp Business Account's id" },
          changes: {
            type: "array",
            items: {
              type: "object",
              required: ["field", "value"],
              properties: {
                field: { type: "string", description: "`messages` for statuses" },
                value: {
                  type: "object",
                  properties: {
                    metadata: {
                      type: "object",
                      required: ["phone_number_id"],
                      properties: {
                        display_phone_number: { type: "string" },
                        phone_number_id: { type: "string", description: "Names the entry" },
                      },
                    },
                    statuses: {
                      type: "array",
                      items: {
                        type: "object",
                        required: ["id", "status"],
                        properties: {
                          id: { type: "string", description: "The message id the send answered (`wamid.…`)" },
                          status: { type: "string", enum: ["sent", "delivered", "read", "failed"] },
                          timestamp: { type: "string" },
                          recipient_id: { type: "string" },
                          errors: {
                            type: "array",
                            items: {
                              type: "object",
                              properties: { code: { type: "integer" }, title: { type: "string" } },
                            },
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
};

/**
 * The WhatsApp webhook: Meta is its caller, by the `verify_token` of an entry at the handshake and
 * by the signature of the entry's `app_secret` on a notification; the handshake answers its
 * challenge as plain text, and a notification comes as raw JSON, the bytes the signature covers.
 */
export const WHATSAPP_WEBHOOK = declareService(WhatsAppWebhookServiceService, {
  dialect: "session",
  callers: { verifyWebhook: "whatsapp-verify-token", receiveWebhook: "whatsapp-signature" },
  rawBodies: {
    receiveWebhook: {
      mediaType: "application/json",
      schema: NOTIFICATION,
      description: "Meta's notification as it was signed; fields other than these are ignored",
    },
  },
  rawAnswers: {
    verifyWebhook: {
      mediaType: "text/plain",
      schema: { type: "string" },
      description: "The hub.challenge, as it came",
    },
  },
});
