# Headless Chromium and its WebDriver for the `weir ui` browser test (tests/ui/), from Debian's
# packages (chromium, chromium-driver). Selenium (a dev extra) drives them by path; nothing is
# downloaded at test time.
need_browser=()
[ -x /usr/bin/chromium ] || need_browser+=(chromium)
[ -x /usr/bin/chromedriver ] || need_browser+=(chromium-driver)
if [ "${#need_browser[@]}" -gt 0 ]; then
    apt_install "${need_browser[@]}"
fi
[ -x /usr/bin/chromium ] || die "chromium is still missing after installing it"
[ -x /usr/bin/chromedriver ] || die "chromedriver is still missing after installing chromium-driver"
/usr/bin/chromium --version 2>/dev/null | head -n 1 || true
unset need_browser
