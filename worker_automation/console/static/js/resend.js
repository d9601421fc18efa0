// An action the API could not be reached for: which ones may be sent again by themselves, and
// waiting until the API answers. A request that never connected did nothing on the server, but
// one cut off mid-way may have: only actions the server refuses or ignores when repeated (cancel
// an open job, set a priority, pause a queue) are sent again; the others are offered to the
// operator to try again.
import { gql } from "./api.js";

const PING = "query Ping { __typename }";

/** Whether ``error`` says the API was not reached at all (no answer, not a refusal). */
export function unreached(error) {
  return error?.code === "NETWORK";
}

/** Resolves once the API answers anything again (a refusal is an answer too). */
export async function apiAnswers() {
  for (let wait = 250; ; wait = Math.min(wait * 2, 2000)) {
    await new Promise((resolve) => setTimeout(resolve, wait));
    try {
      await gql(PING);
      return;
    } catch (error) {
      if (!unreached(error)) return;
    }
  }
}

export const WILL_RESEND = "A API não respondeu: a ação será enviada de novo quando ela voltar.";
export const NOT_SENT = "A API não respondeu e a ação pode não ter sido feita. Confira e tente de novo.";
export const NOT_NEEDED = "A API voltou, mas o alvo já não está como estava no clique: a ação não foi reenviada.";
