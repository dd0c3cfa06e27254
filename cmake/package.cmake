# The Debian package of the agent (CPack's DEB generator): `cpack -G DEB` in a build directory. What it installs and why: deploy/README.md (Debian package).
# Installed by it, and checked by tests/deploy/deb_check.sh in a scratch root:
#   /usr/bin/lockwarden                          the agent and CLI, stripped
#   /usr/lib/systemd/system/lockwarden.service   deploy/systemd/lockwarden.service with the
#                                                packaged path and optional credentials
#   /usr/lib/sysusers.d/lockwarden.conf          user lockwarden, group lockers
#   /usr/lib/tmpfiles.d/lockwarden.conf          secrets kept root-only
#   /etc/lockwarden/config.toml                  a conffile: deploy/debian/config.toml
#   /usr/share/man/man1/lockwarden*.1.gz         from --help (deploy/debian/man.sh, help2man)
set(lw_deb ${CMAKE_SOURCE_DIR}/deploy/debian)
# Every rule below is for the package only: a plain `cmake --install` installs nothing (it would
# write /etc/lockwarden/config.toml over an operator's, and a unit naming /usr/bin under another
# prefix). CPack installs the component into its staging root.
set(lw_component COMPONENT deb EXCLUDE_FROM_ALL)
set(lw_pkg ${CMAKE_BINARY_DIR}/package)

# The unit of deploy/systemd, one source for both installs. For the package: its own header
# comment, the binary's path, and the secrets' LoadCredential= lines commented out (a documented
# drop-in), because a credential whose file is missing stops the unit from starting (systemd
# 252) and a fresh install has none. Each edit must apply, or the configure fails.
file(READ ${CMAKE_SOURCE_DIR}/deploy/systemd/lockwarden.service lw_unit)
function(lw_unit_edit regex replacement)
  string(REGEX MATCH "${regex}" lw_match "${lw_unit}")
  if(lw_match STREQUAL "")
    message(FATAL_ERROR "deploy/systemd/lockwarden.service no longer matches \"${regex}\": "
      "update cmake/package.cmake")
  endif()
  string(REGEX REPLACE "${regex}" "${replacement}" lw_edited "${lw_unit}")
  set(lw_unit "${lw_edited}" PARENT_SCOPE)
endfunction()
lw_unit_edit("^[^[]*\\[Unit\\]" "# lockwarden agent, installed by the lockwarden Debian package: /usr/bin/lockwarden, its
# settings in /etc/lockwarden/config.toml (a conffile), user lockwarden and group lockers
# (/usr/lib/sysusers.d/lockwarden.conf). Made from deploy/systemd/lockwarden.service of the
# source, whose comments below say why each setting is there. Change it with a drop-in
# (systemctl edit lockwarden), which upgrades keep.

[Unit]")
lw_unit_edit("ExecStart=/usr/local/bin/lockwarden " "ExecStart=/usr/bin/lockwarden ")
lw_unit_edit("ExecReload=/usr/local/bin/lockwarden " "ExecReload=/usr/bin/lockwarden ")
lw_unit_edit("\nDocumentation=[^\n]*" "\nDocumentation=man:lockwarden-serve(1) man:lockwarden(1)")
lw_unit_edit("\nLoadCredential=" "\n#LoadCredential=")
lw_unit_edit("Drop a line \\(and the setting\\) if you do not use that secret\\."
  "The package ships these commented out: add the ones you use in a drop-in
# (systemctl edit lockwarden), with the matching setting in /etc/lockwarden/config.toml.")
file(WRITE ${lw_pkg}/lockwarden.service "${lw_unit}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/deploy/systemd/lockwarden.service)

# Man pages, regenerated when the binary changes.
find_program(LW_HELP2MAN help2man)
if(LW_HELP2MAN)
  add_custom_command(OUTPUT ${lw_pkg}/man/lockwarden.1.gz
    COMMAND bash ${lw_deb}/man.sh $<TARGET_FILE:lockwarden> ${lw_pkg}/man ${PROJECT_VERSION}
    DEPENDS lockwarden ${lw_deb}/man.sh
    COMMENT "Man pages from lockwarden --help")
  add_custom_target(lockwarden_man ALL DEPENDS ${lw_pkg}/man/lockwarden.1.gz)
  install(DIRECTORY ${lw_pkg}/man/ DESTINATION share/man/man1 ${lw_component}
    FILES_MATCHING PATTERN "*.1.gz")
else()
  message(STATUS "help2man not found: no man pages in the package (bash .ci/deps.sh installs it)")
endif()

install(TARGETS lockwarden RUNTIME DESTINATION bin ${lw_component})
install(FILES ${lw_pkg}/lockwarden.service DESTINATION lib/systemd/system ${lw_component})
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/lockwarden.sysusers DESTINATION lib/sysusers.d
  RENAME lockwarden.conf ${lw_component})
install(FILES ${lw_deb}/lockwarden.tmpfiles DESTINATION lib/tmpfiles.d RENAME lockwarden.conf
  ${lw_component})
install(FILES ${lw_deb}/config.toml DESTINATION /etc/lockwarden ${lw_component})
install(FILES ${lw_deb}/copyright DESTINATION share/doc/lockwarden ${lw_component})

set(CPACK_GENERATOR DEB)
set(CPACK_COMPONENTS_ALL deb)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)  # one package, named lockwarden
set(CPACK_PACKAGE_NAME lockwarden)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # lockwarden_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "lockwarden authors <lockwarden@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "lock agent: Redlock over N Redis masters for local apps")
set(CPACK_PACKAGE_DESCRIPTION "Apps on the host ask the agent for locks over a Unix socket; it \
grants them with Redlock across independent Redis masters, renews them while the app lives, \
releases them when it dies, hands them to the next local waiter, issues fencing tokens, and \
serves Prometheus metrics and an operator page. Also semaphores, read-write locks, leader \
election and detached leases.")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The shared libraries' packages from dpkg-shlibdeps; systemd for sysusers, tmpfiles, the unit.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS systemd)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS redis-server)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${lw_deb}/conffiles ${lw_deb}/postinst ${lw_deb}/prerm
  ${lw_deb}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
