// Tells the class's poll that its page went blank (explorer/app/classroom.py).
export default function ({ setTriggerValue }) {
  const check = setTimeout(() => {
    const state = document.querySelector("[data-test-script-state]");
    const idle = state && state.dataset.testScriptState === "notRunning";
    if (idle && !document.querySelector('[data-testid="stMain"] h1')) setTriggerValue("blank", Date.now());
  }, 400);
  return () => clearTimeout(check);
}
