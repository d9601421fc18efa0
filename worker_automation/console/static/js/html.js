// Preact bound to htm: JSX-like templates with no build step.
import { h, render } from "preact";
import htm from "htm";

export const html = htm.bind(h);
export { h, render };
export { useCallback, useEffect, useMemo, useReducer, useRef, useState } from "preact/hooks";
