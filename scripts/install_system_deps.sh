#!/usr/bin/env bash
# Install the system packages qnb's tests and demos need, only those that are missing:
#   - a Vulkan loader and driver (Mesa's lavapipe runs WGSL on the CPU when there is no GPU),
#   - Chromium (the JupyterLab widget test drives it with Playwright),
#   - g++ (the cuda-host tests compile the generated CUDA C++ for the host),
#   - python3-venv when `python3 -m venv` cannot work (Debian splits ensurepip out).
# As root on Debian/Ubuntu it installs them (apt-get update runs at most once, and only when
# something must be installed). Otherwise it says what is missing and exits 0: the tests that
# need a missing piece skip (or fail under QNB_REQUIRE_WGPU=1) with the reason.
set -euo pipefail

say() { printf 'install_system_deps: %s\n' "$*"; }

have_vulkan_icd() {
    local dir
    if [[ -n "${VK_ICD_FILENAMES:-}${VK_DRIVER_FILES:-}" ]]; then
        return 0  # the user points the loader at a driver explicitly
    fi
    for dir in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
        if compgen -G "$dir/*.json" >/dev/null; then
            return 0
        fi
    done
    return 1
}

have_vulkan_loader() {
    # Not `ldconfig -p | grep -q`: grep exiting early makes ldconfig fail with SIGPIPE.
    # ldconfig lives in /sbin, outside a normal user's PATH on Debian.
    local ldconfig
    ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
    [[ $("$ldconfig" -p 2>/dev/null) == *'libvulkan.so.1 '* ]] ||
        compgen -G '/usr/lib/*/libvulkan.so.1' >/dev/null ||
        compgen -G '/usr/lib/libvulkan.so.1' >/dev/null
}

missing=()
if ! "${PYTHON:-python3}" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
if ! have_vulkan_loader; then
    missing+=(libvulkan1)
fi
if ! have_vulkan_icd; then
    missing+=(mesa-vulkan-drivers)
fi
if ! command -v g++ >/dev/null 2>&1; then
    missing+=(g++)
fi
if [[ ! -x /usr/bin/chromium ]]; then
    missing+=(chromium)
fi

if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi

if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    say "missing system packages: ${missing[*]}"
    say "install them with: sudo apt-get install -y ${missing[*]}"
    say "(continuing; tests that need them will skip with the reason)"
    exit 0
fi

say "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
start=$SECONDS
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
say "installed in $((SECONDS - start)) s"
